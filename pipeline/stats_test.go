package pipeline_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
)

// Guarantee: Stats counts every message once per stage by outcome: the
// processors' in, succeeded and failed by disposition (after HandleFailed
// changed it), the batcher's in, batches by trigger, batch sizes and
// outcomes; nothing is left in flight once everything is acknowledged, and
// the handlers' durations and busy time are recorded on the documented
// sample (the batch handler on one batch in ⌈64/BatchSize⌉).
func TestStatsCountMessagesByStageAndOutcome(t *testing.T) {
	const n = 60
	rec := acker.NewRecorder(false)
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name: "stats",
		Processors: processor.Options[uint64, uint64]{
			Concurrency: 2,
			Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				if m.Data%10 == 0 { // 6 messages
					return 0, errors.New("tens fail")
				}
				if m.Data%10 == 5 { // 6 messages
					m.SetBatchKey("flush")
					m.SetBatchMode(message.Flush)
				}
				return m.Data, nil
			},
			HandleFailed: func(_ context.Context, msgs []*message.Message[uint64]) {
				for _, m := range msgs {
					if m.Data%20 == 0 { // 3 of them are discarded
						m.SetDisposition(acker.DispositionDiscard)
					}
				}
			},
		},
		Batchers: []batcher.Options[uint64]{{
			Name: "default", BatchSize: 4, BatchTimeout: time.Hour, Concurrency: 1,
			Handle: func(_ context.Context, batch []*message.Message[uint64], _ message.BatchInfo) error {
				for _, m := range batch {
					if m.Data == 1 {
						m.Fail(errors.New("one fails in its batch"))
					}
				}
				return nil
			},
		}},
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	msgs := make([]*message.Message[uint64], n)
	for i := range msgs {
		msgs[i] = message.New(uint64(i), rec, uint64(i))
	}
	if err := p.Push(ctxT(t, 10*time.Second), msgs...); err != nil {
		t.Fatal(err)
	}
	// 54 reach the batcher: 6 in flush batches of their own key, 48 in
	// size batches of 4 on the default key, so all are emitted without a
	// timeout or a stop.
	wait.For(t, "every outcome", func() bool { return rec.Total() == n })
	var st pipeline.Stats
	// A processor counts its chunk once it has handed the chunk on, which
	// may be after the batcher has handled it: wait for both stages.
	wait.For(t, "the processors' outcomes of 60 messages and the batcher's of 54", func() bool {
		st = p.Stats()
		return st.Processors.Succeeded+st.Processors.Failed.Total() == n &&
			st.Batchers[0].Succeeded+st.Batchers[0].Failed.Total() == 54
	})
	pr := st.Processors
	if pr.In != n || pr.Succeeded != 54 || pr.Failed != (pipeline.Failures{Default: 3, Discard: 3}) || pr.InFlight != 0 || pr.Unhandled != 0 {
		t.Errorf("processors: in %d succeeded %d failed %+v in flight %d unhandled %d; want 60, 54, {3 0 3}, 0, 0",
			pr.In, pr.Succeeded, pr.Failed, pr.InFlight, pr.Unhandled)
	}
	if pr.Latency.Count == 0 || pr.Latency.Count > n || pr.Busy <= 0 || pr.Stage != "stats.processor" || pr.Concurrency != 2 {
		t.Errorf("processors: latency count %d (want 1..60), busy %v, stage %q, concurrency %d", pr.Latency.Count, pr.Busy, pr.Stage, pr.Concurrency)
	}
	b := st.Batchers[0]
	if b.In != 54 || b.Succeeded != 53 || b.Failed != (pipeline.Failures{Default: 1}) || b.InFlight != 0 {
		t.Errorf("batcher: in %d succeeded %d failed %+v in flight %d; want 54, 53, {1 0 0}, 0", b.In, b.Succeeded, b.Failed, b.InFlight)
	}
	if b.Batches["size"] != 12 || b.Batches["flush"] != 6 || len(b.Batches) != 2 {
		t.Errorf("batcher: batches by trigger %v, want size 12, flush 6", b.Batches)
	}
	// Batches of 4: the one batch processor times one batch in
	// ⌈64/4⌉ = 16, its 1st and 17th of 18.
	if b.Sizes.Count != 18 || b.Sizes.Sum != 54 || b.Latency.Count != 2 || b.Busy <= 0 {
		t.Errorf("batcher: %d batch sizes summing to %v, %d latencies, busy %v; want 18, 54, 2, > 0", b.Sizes.Count, b.Sizes.Sum, b.Latency.Count, b.Busy)
	}
	if st.Name != "stats" || st.Started.IsZero() || st.Stopped || st.Err != nil || len(st.Producers) != 0 {
		t.Errorf("pipeline: name %q started %v stopped %v err %v producers %d", st.Name, st.Started, st.Stopped, st.Err, len(st.Producers))
	}
	if err := p.Stop(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); !st.Stopped {
		t.Error("Stats after Stop does not report the pipeline stopped")
	}
}

// Guarantee: messages held by the handlers are reported in flight, and
// Stats can be read concurrently with the stages (the race detector checks
// the counters are only read atomically).
func TestStatsReportInFlightWhileHandlersRun(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name: "held",
		Processors: processor.Options[uint64, uint64]{
			Concurrency: 2, MaxDemand: 1,
			Handle: func(ctx context.Context, m *message.Message[uint64]) (uint64, error) {
				<-release
				return m.Data, nil
			},
		},
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { open(); _ = p.Stop(context.Background()) })
	rec := acker.NewRecorder(false)
	for i := range 5 {
		if err := p.Push(ctxT(t, 10*time.Second), message.New(uint64(i), rec, uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "2 messages in flight and 3 queued", func() bool {
		st := p.Stats().Processors
		return st.InFlight == 2 && st.Queued == 3 && st.In == 2
	})
	if st := p.Stats().Processors; st.QueueCapacity < 3 || st.Running != 2 {
		t.Errorf("queue capacity %d, running %d; want ≥ 3 and 2", st.QueueCapacity, st.Running)
	}
	open()
	wait.For(t, "5 successes and nothing in flight or queued", func() bool {
		st := p.Stats().Processors
		return st.Succeeded == 5 && st.InFlight == 0 && st.Queued == 0
	})
}

// Guarantee: the busy ratios of Stats are the stages' busy time over their
// workers' time since Start: a processor busy one second of the four
// since Start reports 0.25, and so does a batch processor.
func TestStatsBusyRatioIsBusyTimeOverTimeSinceStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:               "busy",
			StallCheckInterval: -1,
			Processors: processor.Options[uint64, uint64]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				time.Sleep(time.Second)
				return m.Data, nil
			}},
			Batchers: []batcher.Options[uint64]{{Name: message.DefaultBatcher, BatchSize: 1, Concurrency: 1,
				Handle: func(context.Context, []*message.Message[uint64], message.BatchInfo) error {
					time.Sleep(time.Second)
					return nil
				}}},
		})
		startPipeline(t, p)
		rec := acker.NewRecorder(false)
		if err := p.Push(t.Context(), message.New[uint64](1, rec, 1)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second)
		synctest.Wait()
		assertExactlyOnce(t, rec, 1)
		st := p.Stats()
		if got := st.Processors.BusyRatio; got != 0.25 {
			t.Errorf("processors' BusyRatio = %v, want 0.25 (busy 1s of 4s)", got)
		}
		if got := st.Batchers[0].BusyRatio; got != 0.25 {
			t.Errorf("batch processors' BusyRatio = %v, want 0.25 (busy 1s of 4s)", got)
		}
	})
}
