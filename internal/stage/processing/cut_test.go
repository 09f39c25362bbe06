package processing_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/stage/processing"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/internal/testsize"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
)

// cutSeeds is how many random drains
// TestCutShortDrainCountsEveryUnhandledMessageOnce cuts short: a few dozen
// by default, more with BOULEVARD_PROCESSOR_CUT_SEEDS=N.
func cutSeeds(t *testing.T) int {
	return testsize.Count(t, "BOULEVARD_PROCESSOR_CUT_SEEDS", 40, 120)
}

// cutRoute stands for a batcher that handles and acknowledges at once
// every message it takes. It takes messages one by one, waits a moment
// before some of them (a busy batcher), and takes nothing more once ctx,
// the hard-stop context, is cancelled; the cancelInPublish-th Publish
// cancels it (0: never).
type cutRoute struct {
	cancel          context.CancelFunc
	cancelInPublish int64
	calls           atomic.Int64
}

func (r *cutRoute) Publish(ctx context.Context, msgs []*message.Message[int]) (int, error) {
	if r.calls.Add(1) == r.cancelInPublish {
		r.cancel()
	}
	var acks acker.Group
	defer acks.Flush(ctx, nil)
	for i, m := range msgs {
		if m.Data%5 == 0 {
			select {
			case <-time.After(time.Millisecond):
			case <-ctx.Done():
			}
		}
		if err := ctx.Err(); err != nil {
			return i, err
		}
		m.AddTo(&acks)
	}
	return len(msgs), nil
}

// procCutShape is one random processor stage and the point where its drain
// is cut.
type procCutShape struct {
	concurrency, maxDemand, routes, messages int
	partitioned, prepare                     bool
	cut                                      time.Duration
	// Cancel at that call of the handler, of Prepare, or of a route's
	// Publish (0: never).
	cancelInHandler, cancelInPrepare, cancelInPublish int
	// reported: the handler asks for one message in four to be
	// acknowledged at once (message.AckImmediately), and defers one in
	// four, reporting its outcome itself.
	reported bool
}

func newProcCutShape(rng *rand.Rand) procCutShape {
	c := procCutShape{
		concurrency: 1 + rng.IntN(4),
		maxDemand:   1 + rng.IntN(50),
		routes:      rng.IntN(3),
		messages:    20 + rng.IntN(300),
		partitioned: rng.IntN(2) == 0,
		prepare:     rng.IntN(3) == 0,
		cut:         time.Duration(rng.IntN(40)) * time.Millisecond,
	}
	switch rng.IntN(4) {
	case 0:
		c.cancelInHandler = 1 + rng.IntN(c.messages)
	case 1:
		if c.prepare {
			c.cancelInPrepare = 1 + rng.IntN(20)
		}
	case 2:
		if c.routes > 0 {
			c.cancelInPublish = 1 + rng.IntN(20)
		}
	}
	c.reported = c.routes > 0 && rng.IntN(2) == 0
	return c
}

// Guarantee: when the hard stop cuts a drain short, wherever it finds the
// messages (queued for a processor, in a chunk whose handler calls it
// cuts short, or handled but not taken by their batcher), every message
// left without an outcome is counted exactly once in the "messages" of
// the processors' warnings, and in Stats().Unhandled; none is
// acknowledged twice, and In = Succeeded + Failed + Unhandled. A message
// acknowledged at once (AckImmediately) or deferred that its batcher did
// not take is not among them: its outcome was reported.
func TestCutShortDrainCountsEveryUnhandledMessageOnce(t *testing.T) {
	testsize.Seeds(t, cutSeeds(t), func(t *testing.T, seed uint64, rng *rand.Rand) {
		runProcCut(t, seed, newProcCutShape(rng))
	})
}

// runProcCut runs one processor stage of shape c, cuts its drain short
// and checks what the warnings and the stats report unhandled.
func runProcCut(t *testing.T, seed uint64, c procCutShape) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var handled, prepared atomic.Int64
	opts := processor.Options[int, int]{
		Concurrency: c.concurrency, MaxDemand: c.maxDemand,
		Handle: func(hctx context.Context, m *message.Message[int]) (int, error) {
			if handled.Add(1) == int64(c.cancelInHandler) {
				cancel()
			}
			if c.routes > 0 {
				m.SetBatcher(strconv.Itoa(m.Data % c.routes))
			}
			if c.reported {
				stagetest.ReportEarly(hctx, m, uint64(m.Data))
			}
			return m.Data, stagetest.Work(hctx, uint64(m.Data))
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
	if c.prepare {
		opts.Prepare = func(pctx context.Context, msgs []*message.Message[int]) error {
			if prepared.Add(1) == int64(c.cancelInPrepare) {
				cancel()
			}
			if msgs[0].Data%13 == 12 {
				return errors.New("no preparation")
			}
			select {
			case <-time.After(time.Millisecond):
				return nil
			case <-pctx.Done():
				return pctx.Err()
			}
		}
	}
	var routes []processing.NamedRoute[int]
	for i := range c.routes {
		routes = append(routes, processing.NamedRoute[int]{Name: strconv.Itoa(i),
			Route: &cutRoute{cancel: cancel, cancelInPublish: int64(c.cancelInPublish)}})
	}
	log := &stagetest.UnackedLog{}
	s := processing.New(opts.WithDefaults(), processing.Config[int]{Name: "p", Logger: slog.New(log), Routes: routes})
	done := stagetest.Go(ctx, s)

	rec := acker.NewRecorder(false)
	all := ints(rec, 0, c.messages)
	accepted, left := stagetest.CutShort(t, s, done, ctx, cancel, all, rec, seed, c.cut)
	st := s.Stats(0)
	sum, lines := log.Sum()
	if sum != left || st.Unhandled != uint64(left) {
		t.Errorf("%+v: %d of %d messages taken got no outcome; the warnings count %d %v, Stats().Unhandled %d",
			c, left, accepted, sum, lines, st.Unhandled)
	}
	if out := st.Succeeded + st.Failed.Total() + st.Unhandled; st.In != uint64(accepted) || st.In != out || st.InFlight != 0 {
		t.Errorf("%+v: %d messages taken; Stats() In %d, Succeeded+Failed+Unhandled %d, InFlight %d",
			c, accepted, st.In, out, st.InFlight)
	}
}
