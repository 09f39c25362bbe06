package batching_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/stage/batching"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/internal/testsize"
	"github.com/boulevard-go/boulevard/message"
)

// cutSeeds is how many random drains
// TestCutShortDrainCountsEveryUnacknowledgedMessageOnce cuts short: a few
// dozen by default, more with BOULEVARD_BATCHER_CUT_SEEDS=N.
func cutSeeds(t *testing.T) int {
	return testsize.Count(t, "BOULEVARD_BATCHER_CUT_SEEDS", 40, 120)
}

// cutShape is one random batcher and the point where its drain is cut.
type cutShape struct {
	batchSize, concurrency, maxDemand, keys, messages, maxWeight int
	partitioned, weighed, flushes                                bool
	timeout, cut                                                 time.Duration
	cancelInHandler, cancelInWeight                              int // cancel at that call (0: never)
	// reported: one message in four comes acknowledged by its processor
	// already (message.AckImmediately's copy), one in four deferred.
	reported bool
}

func newCutShape(rng *rand.Rand) cutShape {
	c := cutShape{
		batchSize:   []int{1, 1, 2, 3, 5, 8, 16, 64}[rng.IntN(8)],
		concurrency: 1 + rng.IntN(4),
		maxDemand:   1 + rng.IntN(100),
		keys:        []int{1, 2, 3, 6, 100}[rng.IntN(5)],
		messages:    20 + rng.IntN(300),
		partitioned: rng.IntN(2) == 0,
		weighed:     rng.IntN(3) == 0,
		flushes:     rng.IntN(4) == 0,
		timeout:     time.Duration(1+rng.IntN(20)) * time.Millisecond,
		cut:         time.Duration(rng.IntN(40)) * time.Millisecond,
	}
	// A small MaxWeight makes one message close two batches: the one it
	// does not fit in, and its own.
	c.maxWeight = []int{2, 3, 1 + c.batchSize}[rng.IntN(3)]
	switch rng.IntN(4) {
	case 0:
		c.cancelInHandler = 1 + rng.IntN(20)
	case 1:
		if c.weighed {
			c.cancelInWeight = 1 + rng.IntN(c.messages)
		}
	}
	c.reported = rng.IntN(2) == 0
	return c
}

// Guarantee: when the hard stop cuts a drain short, wherever it finds the
// messages (queued for a partition, in the chunk a partition is taking in,
// in open batches, in emitted batches not yet queued, queued for a batch
// processor, or taken by one that has not handled them yet), every message
// left without an outcome is counted exactly once in the "messages" of the
// batcher's warnings, and in Stats().Unhandled; a message whose outcome
// is not the batcher's to report (acknowledged by its processor already,
// or deferred) is never among them but in Stats().Dropped, and In =
// Succeeded + Failed + Unhandled + Dropped.
func TestCutShortDrainCountsEveryUnacknowledgedMessageOnce(t *testing.T) {
	testsize.Seeds(t, cutSeeds(t), func(t *testing.T, seed uint64, rng *rand.Rand) {
		runCut(t, seed, newCutShape(rng))
	})
}

// runCut runs one batcher of shape c, cuts its drain short and checks what
// the warnings and the stats report unacknowledged.
func runCut(t *testing.T, seed uint64, c cutShape) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var handled, weighed atomic.Int64
	opts := batcher.Options[int]{
		Name: "cut", BatchSize: c.batchSize, BatchTimeout: c.timeout,
		Concurrency: c.concurrency, MaxDemand: c.maxDemand,
		Handle: func(hctx context.Context, batch []*message.Message[int], _ message.BatchInfo) error {
			if handled.Add(1) == int64(c.cancelInHandler) {
				cancel()
			}
			return stagetest.Work(hctx, uint64(batch[0].Data))
		},
	}
	if c.partitioned {
		opts.PartitionBy = func(m *message.Message[int]) string {
			if m.Data%97 == 96 {
				panic("no partition")
			}
			return strconv.Itoa(m.Data % 7)
		}
	}
	if c.weighed {
		opts.MaxWeight = c.maxWeight
		opts.Weight = func(m *message.Message[int]) int {
			if weighed.Add(1) == int64(c.cancelInWeight) {
				cancel()
			}
			if m.Data%89 == 88 {
				panic("no weight")
			}
			return 1 + m.Data%3
		}
	}
	log := &stagetest.UnackedLog{}
	s := batching.New(opts.WithDefaults(), batching.Config{Name: "p", Logger: slog.New(log)})
	done := stagetest.Go(ctx, s)

	rec := acker.NewRecorder(false)
	all := make([]*message.Message[int], c.messages)
	for i := range all {
		all[i] = msg(rec, i, strconv.Itoa(i%c.keys))
		if c.flushes && i%11 == 10 {
			all[i].SetBatchMode(message.Flush)
		}
		switch {
		case !c.reported:
		case i%4 == 1:
			// What a processor hands on once it acknowledged
			// the message: a copy, without its acknowledger.
			cp := new(message.Message[int])
			message.Detach(cp, all[i], i)
			all[i] = cp
		case i%4 == 3:
			all[i].Defer()
		}
	}
	accepted, left := stagetest.CutShort(t, s, done, ctx, cancel, all, rec, seed, c.cut)
	// Publish leaves the messages it took first, so those taken are
	// all[:accepted]. The reported ones get no outcome here, handled or
	// not.
	reported := 0
	for _, m := range all[:accepted] {
		if m.Acknowledged() || m.Deferred() {
			reported++
		}
	}
	owed := left - reported
	st := s.Stats(0)
	if sum, lines := log.Sum(); sum != owed || st.Unhandled != uint64(owed) {
		t.Errorf("%+v: %d of %d messages taken got no outcome they were owed; the warnings count %d %v, Stats().Unhandled %d",
			c, owed, accepted, sum, lines, st.Unhandled)
	}
	if out := st.Succeeded + st.Failed.Total() + st.Unhandled + st.Dropped; st.In != uint64(accepted) || st.In != out ||
		st.InFlight != 0 || st.Dropped > uint64(reported) {
		t.Errorf("%+v: %d messages taken, %d reported; Stats() In %d, Succeeded+Failed+Unhandled+Dropped %d, Dropped %d, InFlight %d",
			c, accepted, reported, st.In, out, st.Dropped, st.InFlight)
	}
}
