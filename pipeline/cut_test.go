package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/internal/testsize"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
)

// pipelineCutSeeds is how many random pipelines
// TestCutShortPipelineCountsEveryUnacknowledgedMessageOnce stops with a
// drain cut short: a few by default, more with
// BOULEVARD_PIPELINE_CUT_SEEDS=N.
func pipelineCutSeeds(t *testing.T) int {
	return testsize.Count(t, "BOULEVARD_PIPELINE_CUT_SEEDS", 10, 30)
}

// pipelineCutShape is one random pipeline, how messages are pushed to it,
// and when it is stopped.
type pipelineCutShape struct {
	concurrency, maxDemand, pushers, messages int
	partitioned                               bool
	batchers                                  []batcherShape
	shutdownTimeout, stopAfter                time.Duration
}

// batcherShape is one random batcher of a pipelineCutShape.
type batcherShape struct {
	batchSize, concurrency int
	partitioned            bool
	timeout                time.Duration
}

func newPipelineCutShape(rng *rand.Rand) pipelineCutShape {
	c := pipelineCutShape{
		concurrency:     1 + rng.IntN(4),
		maxDemand:       1 + rng.IntN(30),
		pushers:         1 + rng.IntN(3),
		messages:        50 + rng.IntN(400),
		partitioned:     rng.IntN(2) == 0,
		shutdownTimeout: time.Duration(1+rng.IntN(30)) * time.Millisecond,
		stopAfter:       time.Duration(rng.IntN(20)) * time.Millisecond,
	}
	for range rng.IntN(3) {
		c.batchers = append(c.batchers, batcherShape{
			batchSize:   []int{1, 2, 5, 16, 64}[rng.IntN(5)],
			concurrency: 1 + rng.IntN(3),
			partitioned: rng.IntN(2) == 0,
			timeout:     time.Duration(1+rng.IntN(20)) * time.Millisecond,
		})
	}
	return c
}

// cutWork is a handler's work on a message or batch whose first payload
// is data: it ignores its context, honours it, or fails, and takes up to
// 3ms.
func cutWork(ctx context.Context, data uint64) error {
	d := time.Duration(data%4) * time.Millisecond
	switch data % 3 {
	case 0: // ignores its context
		time.Sleep(d)
	case 1:
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	default:
		if data%2 == 0 {
			return errors.New("refused")
		}
	}
	return nil
}

// cutBatcherName names batcher i of a pipelineCutShape: the first one is
// the default batcher.
func cutBatcherName(i int) string {
	if i == 0 {
		return message.DefaultBatcher
	}
	return strconv.Itoa(i)
}

// Guarantee: however a pipeline is shaped (processors and batchers,
// partitioned or not) and wherever a drain cut short by the shutdown
// timeout finds its messages, every message the pipeline took either got
// exactly one outcome or is counted exactly once among the processors' and
// the batchers' Unhandled, and in exactly one of their warnings.
func TestCutShortPipelineCountsEveryUnacknowledgedMessageOnce(t *testing.T) {
	for seed := range uint64(pipelineCutSeeds(t)) {
		c := newPipelineCutShape(rand.New(rand.NewPCG(seed, 0)))
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runPipelineCut(t, seed, c) })
		})
	}
}

// runPipelineCut runs one pipeline of shape c, pushes messages until Stop
// makes Push fail, and checks the outcomes against the warnings and the
// stats.
func runPipelineCut(t *testing.T, seed uint64, c pipelineCutShape) {
	opts := pipeline.Options[uint64, uint64]{
		Name:            "cut",
		ShutdownTimeout: c.shutdownTimeout,
		Processors: processor.Options[uint64, uint64]{
			Concurrency: c.concurrency, MaxDemand: c.maxDemand,
			Handle: func(ctx context.Context, m *message.Message[uint64]) (uint64, error) {
				if len(c.batchers) > 0 {
					m.SetBatcher(cutBatcherName(int(m.Data % uint64(len(c.batchers)))))
				}
				return m.Data, cutWork(ctx, m.Data)
			},
		},
	}
	if c.partitioned {
		opts.Processors.PartitionBy = func(m *message.Message[uint64]) string { return strconv.FormatUint(m.Data%5, 10) }
	}
	for i, b := range c.batchers {
		bo := batcher.Options[uint64]{
			Name: cutBatcherName(i), BatchSize: b.batchSize, BatchTimeout: b.timeout, Concurrency: b.concurrency,
			Handle: func(ctx context.Context, batch []*message.Message[uint64], _ message.BatchInfo) error {
				return cutWork(ctx, batch[0].Data/2)
			},
		}
		if b.partitioned {
			bo.PartitionBy = func(m *message.Message[uint64]) string { return strconv.FormatUint(m.Data%7, 10) }
		}
		opts.Batchers = append(opts.Batchers, bo)
	}
	log := &stagetest.UnackedLog{}
	opts.Logger = slog.New(log)
	p := mustNew(t, opts)
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}

	rec := acker.NewRecorder(false)
	var accepted atomic.Int64
	var pushers sync.WaitGroup
	for w := range c.pushers {
		pushers.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)+1))
			// One message a Push: it is taken if, and only if, Push
			// returns nil.
			for i := w; i < c.messages; i += c.pushers {
				if p.Push(t.Context(), message.New(uint64(i), rec, uint64(i))) != nil {
					return
				}
				accepted.Add(1)
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(2)) * time.Millisecond)
				}
			}
		})
	}
	time.Sleep(c.stopAfter)
	err := p.Stop(context.Background())
	pushers.Wait()
	<-p.Done()
	if err != nil && !errors.Is(err, pipeline.ErrShutdownTimeout) {
		t.Fatalf("Stop: %v", err)
	}

	counts := rec.Counts()
	for id, n := range counts {
		if n != 1 {
			t.Errorf("message %d acknowledged %d times", id, n)
		}
	}
	left := int(accepted.Load()) - len(counts)
	st := p.Stats()
	unhandled := st.Processors.Unhandled
	for _, b := range st.Batchers {
		unhandled += b.Unhandled
	}
	sum, lines := log.Sum()
	if sum != left || unhandled != uint64(left) {
		t.Errorf("%+v: %d of %d messages taken got no outcome; the warnings count %d %v, Unhandled %d (processors %d)",
			c, left, accepted.Load(), sum, lines, unhandled, st.Processors.Unhandled)
	}
}
