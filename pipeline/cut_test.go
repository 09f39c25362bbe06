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
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/internal/testsize"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
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
	// reported: with batchers, the handler asks for one message in four
	// to be acknowledged at once (message.AckImmediately), and defers one
	// in four, reporting its outcome itself.
	reported bool
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
	c.reported = len(c.batchers) > 0 && rng.IntN(2) == 0
	return c
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
// partitioned or not, messages acknowledged at once or deferred by their
// handler) and wherever a drain cut short by the shutdown timeout finds
// its messages, every message the pipeline took either got exactly one
// outcome or is counted exactly once among the processors' and the
// batchers' Unhandled, and in exactly one of their warnings.
func TestCutShortPipelineCountsEveryUnacknowledgedMessageOnce(t *testing.T) {
	testsize.Seeds(t, pipelineCutSeeds(t), func(t *testing.T, seed uint64, rng *rand.Rand) {
		runPipelineCut(t, seed, newPipelineCutShape(rng))
	})
}

// cutOptions are the options of a pipeline of shape c, logging to log.
func cutOptions(c pipelineCutShape, log *stagetest.UnackedLog) pipeline.Options[uint64, uint64] {
	opts := pipeline.Options[uint64, uint64]{
		Name:            "cut",
		ShutdownTimeout: c.shutdownTimeout,
		Logger:          slog.New(log),
		Processors: processor.Options[uint64, uint64]{
			Concurrency: c.concurrency, MaxDemand: c.maxDemand,
			Handle: func(ctx context.Context, m *message.Message[uint64]) (uint64, error) {
				if len(c.batchers) > 0 {
					m.SetBatcher(cutBatcherName(int(m.Data % uint64(len(c.batchers)))))
				}
				if c.reported {
					stagetest.ReportEarly(ctx, m, m.Data)
				}
				return m.Data, stagetest.Work(ctx, m.Data)
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
				return stagetest.Work(ctx, batch[0].Data/2)
			},
		}
		if b.partitioned {
			bo.PartitionBy = func(m *message.Message[uint64]) string { return strconv.FormatUint(m.Data%7, 10) }
		}
		opts.Batchers = append(opts.Batchers, bo)
	}
	return opts
}

// runPipelineCut runs one pipeline of shape c, pushes messages until Stop
// makes Push fail, and checks the outcomes against the warnings and the
// stats.
func runPipelineCut(t *testing.T, seed uint64, c pipelineCutShape) {
	log := &stagetest.UnackedLog{}
	p := mustNew(t, cutOptions(c, log))
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
	checkPipelineCut(t, c, p, err, log, rec, int(accepted.Load()))
}

// checkPipelineCut checks a pipeline of shape c that Stop (which returned
// err) stopped, once it is done: of the taken messages, those without an
// outcome in rec are exactly the stages' Unhandled and the sum of the
// warnings in log, and none got two outcomes.
func checkPipelineCut(t *testing.T, c pipelineCutShape, p *pipeline.Pipeline[uint64, uint64], err error,
	log *stagetest.UnackedLog, rec *acker.Recorder, taken int) {
	t.Helper()
	if err != nil && !errors.Is(err, pipeline.ErrShutdownTimeout) {
		t.Fatalf("Stop: %v", err)
	}
	counts := rec.Counts()
	for id, n := range counts {
		if n != 1 {
			t.Errorf("message %d acknowledged %d times", id, n)
		}
	}
	left := taken - len(counts)
	st := p.Stats()
	var producers uint64
	for _, ps := range st.Producers {
		producers += ps.Unhandled
	}
	unhandled := producers + st.Processors.Unhandled
	for _, b := range st.Batchers {
		unhandled += b.Unhandled
	}
	sum, lines := log.Sum()
	if sum != left || unhandled != uint64(left) {
		t.Errorf("%+v: %d of %d messages taken got no outcome; the warnings count %d %v, Unhandled %d (producers %d, processors %d)",
			c, left, taken, sum, lines, unhandled, producers, st.Processors.Unhandled)
	}
}

// Guarantee: in a pipeline fed by a producer.Source, whose producer stages
// may still hold delivered messages when a drain is cut short (or be
// handed more by a fetch that was under way), every message the source
// delivered either got exactly one outcome or is counted exactly once
// among the producer stages', the processors' and the batchers'
// Unhandled, and in exactly one of their warnings.
func TestCutShortPipelineCountsEveryUndispatchedMessageOnce(t *testing.T) {
	testsize.Seeds(t, pipelineCutSeeds(t), func(t *testing.T, seed uint64, rng *rand.Rand) {
		c := newPipelineCutShape(rng)
		src := &cutSource{
			feeds: 1 + rng.IntN(3), per: c.messages,
			flow: producer.Flow{Initial: 2 + rng.IntN(60), Refill: 1 + rng.IntN(40)},
			rec:  acker.NewRecorder(false), seed: seed,
		}
		src.flow.Threshold = rng.IntN(src.flow.Initial)
		runSourceCut(t, c, src)
	})
}

// runSourceCut runs one pipeline of shape c fed by src in c.pushers
// producer stages, stops it and checks what src delivered against the
// outcomes, the warnings and the stats.
func runSourceCut(t *testing.T, c pipelineCutShape, src *cutSource) {
	log := &stagetest.UnackedLog{}
	opts := cutOptions(c, log)
	opts.Producer = producer.Options[uint64]{Source: src, Concurrency: c.pushers, Flow: src.flow}
	p := mustNew(t, opts)
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(c.stopAfter)
	err := p.Stop(context.Background())
	<-p.Done()
	checkPipelineCut(t, c, p, err, log, src.rec, int(src.delivered.Load()))
}

// cutSource is a source whose every feed delivers up to per messages, as
// many as its permits allow at a time, each after a fetch of up to 2ms
// that does not heed the run's context (so a fetch under way when the
// stage stops still delivers), then waits for its run to be cancelled.
type cutSource struct {
	producer.Basic
	feeds, per int
	flow       producer.Flow
	rec        *acker.Recorder
	seed       uint64
	ids        atomic.Uint64
	delivered  atomic.Int64 // messages the stages took
}

func (s *cutSource) Run(ctx context.Context, st *producer.Stage[uint64]) error {
	var g sync.WaitGroup
	for f := range s.feeds {
		feed := st.NewFeed(fmt.Sprint(f), nil)
		g.Go(func() {
			rng := rand.New(rand.NewPCG(s.seed, uint64(st.Index()*s.feeds+f)+100))
			for sent := 0; sent < s.per; {
				n, err := feed.Acquire(ctx, min(1+rng.IntN(32), s.per-sent))
				if err != nil {
					return
				}
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
				msgs := make([]*message.Message[uint64], n)
				for i := range msgs {
					id := s.ids.Add(1)
					msgs[i] = message.New(id, s.rec, id)
				}
				if !feed.TryDeliver(msgs...) {
					return
				}
				s.delivered.Add(int64(n))
				sent += n
			}
		})
	}
	g.Wait()
	<-ctx.Done()
	return nil
}
