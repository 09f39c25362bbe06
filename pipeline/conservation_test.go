package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// restartingSource delivers ids [0, half) on its first run, then fails it;
// its second run delivers [half, total) and waits to be stopped.
type restartingSource struct {
	producer.Basic
	half, total uint64
	ack         acker.Acknowledger
	runs        atomic.Int32
}

func (s *restartingSource) Run(ctx context.Context, st *producer.Stage[uint64]) error {
	run := s.runs.Add(1)
	from, to := uint64(0), s.half
	if run > 1 {
		from, to = s.half, s.total
	}
	f := st.NewFeed("partition-0", nil)
	for id := from; id < to; {
		n, err := f.Acquire(ctx, int(to-id))
		if err != nil {
			return nil
		}
		for range n {
			f.Deliver(message.New(id, s.ack, id))
			id++
		}
	}
	if run == 1 {
		return errors.New("connection reset")
	}
	<-ctx.Done()
	return nil
}

// disposeByValue, a HandleFailed, discards the failed messages of a value
// ≡ 1 mod 3, asks for a retry of those ≡ 2 and leaves the others to the
// source's policy.
func disposeByValue(_ context.Context, msgs []*message.Message[uint64]) {
	for _, m := range msgs {
		switch m.Data % 3 {
		case 1:
			m.SetDisposition(acker.DispositionDiscard)
		case 2:
			m.SetDisposition(acker.DispositionRetry)
		}
	}
}

// statsCounters are the counters of a pipeline's Stats that never go down.
func statsCounters(st pipeline.Stats) []uint64 {
	pr := st.Processors
	c := []uint64{pr.In, pr.Succeeded, pr.Failed.Default, pr.Failed.Retry, pr.Failed.Discard, pr.Unhandled}
	for _, b := range st.Batchers {
		c = append(c, b.In, b.Succeeded, b.Failed.Default, b.Failed.Retry, b.Failed.Discard, b.Unhandled, b.Dropped, b.Sizes.Count)
	}
	for _, ps := range st.Producers {
		c = append(c, uint64(ps.Restarts), ps.Unhandled)
	}
	return c
}

// Guarantee: on a bad day (a handler that fails or panics on a third of
// the messages, a batch handler that fails some batches, the source
// failing and restarting halfway) every message the source delivered is
// counted exactly once by each stage once the pipeline has stopped: the
// processors' In = Succeeded + Failed + Unhandled with nothing in flight,
// the batcher takes exactly what the processors passed on and In =
// Succeeded + Failed + Unhandled + Dropped + InFlight with nothing in
// flight, and the acknowledger saw as many successes as the batcher
// counted and as many failures as both stages together; no counter read
// while the pipeline ran ever went down, and no reading showed more
// outcomes than messages in.
func TestStatsAddUpOnABadDayWithASourceRestart(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { statsAddUpOnABadDay(t, seed) })
		})
	}
}

func statsAddUpOnABadDay(t *testing.T, seed uint64) {
	const total = 600
	rec := acker.NewRecorder(false)
	src := &restartingSource{half: total / 2, total: total, ack: rec}
	// A seeded third of the messages fail, half of those by panicking.
	fate := make([]int, total)
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range fate {
		fate[i] = rng.IntN(6)
	}
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:     "badday",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[uint64]{Source: src},
		Processors: processor.Options[uint64, uint64]{
			Concurrency: 3,
			Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				switch fate[m.Data] {
				case 0:
					return 0, errors.New("handler fails")
				case 1:
					panic("handler panics")
				}
				return m.Data, nil
			},
			HandleFailed: disposeByValue,
		},
		Batchers: []batcher.Options[uint64]{{
			Name: "default", BatchSize: 7, BatchTimeout: 50 * time.Millisecond, Concurrency: 2,
			Handle: func(_ context.Context, batch []*message.Message[uint64], _ message.BatchInfo) error {
				if batch[0].Data%5 == 0 {
					return errors.New("batch fails")
				}
				return nil
			},
			HandleFailed: func(ctx context.Context, failed []*message.Message[uint64], _ message.BatchInfo) {
				disposeByValue(ctx, failed)
			},
		}},
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	prev := statsCounters(p.Stats())
	check := func(when string, st pipeline.Stats) {
		t.Helper()
		cur := statsCounters(st)
		for i := range cur {
			if cur[i] < prev[i] {
				t.Fatalf("%s: counter %d went down from %d to %d (%v then %v)", when, i, prev[i], cur[i], prev, cur)
			}
		}
		prev = cur
		pr, b := st.Processors, st.Batchers[0]
		if out := pr.Succeeded + pr.Failed.Total() + pr.Unhandled; out > pr.In {
			t.Fatalf("%s: processors show %d outcomes of %d messages in", when, out, pr.In)
		}
		if out := b.Succeeded + b.Failed.Total() + b.Unhandled + b.Dropped; out > b.In {
			t.Fatalf("%s: batcher shows %d outcomes of %d messages in", when, out, b.In)
		}
	}
	for deadline := time.Now().Add(time.Minute); rec.Total() < total; time.Sleep(10 * time.Millisecond) {
		check("while running", p.Stats())
		if time.Now().After(deadline) {
			t.Fatalf("%d outcomes of %d messages after a minute: %+v", rec.Total(), total, p.Stats())
		}
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	check("once stopped", st)
	pr, b := st.Processors, st.Batchers[0]
	if pr.In != total || pr.In != pr.Succeeded+pr.Failed.Total()+pr.Unhandled || pr.InFlight != 0 || pr.Queued != 0 {
		t.Errorf("processors: in %d, succeeded %d, failed %+v, unhandled %d, in flight %d, queued %d; want in %d = succeeded + failed + unhandled, none in flight or queued",
			pr.In, pr.Succeeded, pr.Failed, pr.Unhandled, pr.InFlight, pr.Queued, total)
	}
	if b.In != pr.Succeeded || b.In != b.Succeeded+b.Failed.Total()+b.Unhandled+b.Dropped+uint64(b.InFlight) || b.InFlight != 0 || b.Queued != 0 || b.Sizes.Sum != float64(b.In) {
		t.Errorf("batcher: in %d (processors passed on %d), succeeded %d, failed %+v, unhandled %d, dropped %d, in flight %d, queued %d, sizes sum %v; want in = succeeded + failed + unhandled + dropped, none in flight or queued",
			b.In, pr.Succeeded, b.Succeeded, b.Failed, b.Unhandled, b.Dropped, b.InFlight, b.Queued, b.Sizes.Sum)
	}
	failed := uint64(rec.FailedCount())
	if succeeded := uint64(rec.Total()) - failed; succeeded != b.Succeeded || failed != pr.Failed.Total()+b.Failed.Total() {
		t.Errorf("acknowledger saw %d successes and %d failures; stats count %d succeeded in the batcher and %d+%d failed",
			succeeded, failed, b.Succeeded, pr.Failed.Total(), b.Failed.Total())
	}
	var byDisposition pipeline.Failures
	for _, c := range rec.Calls() {
		for _, o := range c.Failed {
			switch o.Disposition {
			case acker.DispositionRetry:
				byDisposition.Retry++
			case acker.DispositionDiscard:
				byDisposition.Discard++
			default:
				byDisposition.Default++
			}
		}
	}
	sum := pr.Failed
	sum.Add(b.Failed)
	if sum != byDisposition {
		t.Errorf("stats count failures %+v by disposition (processors %+v, batcher %+v); the acknowledger saw %+v", sum, pr.Failed, b.Failed, byDisposition)
	}
	for id, n := range rec.Counts() {
		if n != 1 {
			t.Errorf("message %d acknowledged %d times", id, n)
		}
	}
	if len(st.Producers) != 1 || st.Producers[0].Restarts != 1 || st.Producers[0].Unhandled != 0 || st.Producers[0].Buffered != 0 {
		t.Errorf("producers: %+v, want one that restarted once, nothing left buffered or unhandled", st.Producers)
	}
}
