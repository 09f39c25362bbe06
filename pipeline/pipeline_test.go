package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func identity(_ context.Context, m *message.Message[uint64]) (uint64, error) { return m.Data, nil }

func mustNew[In, Out any](t *testing.T, o pipeline.Options[In, Out]) *pipeline.Pipeline[In, Out] {
	t.Helper()
	p, err := pipeline.New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// assertExactlyOnce checks that the recorder saw each expected id exactly once.
func assertExactlyOnce(t *testing.T, rec *acker.Recorder, want int) {
	t.Helper()
	counts := rec.Counts()
	if len(counts) != want {
		t.Fatalf("acknowledged %d distinct messages, want %d", len(counts), want)
	}
	for id, n := range counts {
		if n != 1 {
			t.Fatalf("message %x acknowledged %d times, want exactly once", id, n)
		}
	}
	if rec.Total() != want {
		t.Fatalf("recorded %d outcomes, want %d", rec.Total(), want)
	}
}

// Guarantee: every message is acknowledged exactly once, successful or
// failed, with and without batchers, under producer and processor concurrency.
func TestEveryMessageAckedExactlyOnce(t *testing.T) {
	for _, withBatchers := range []bool{false, true} {
		t.Run(fmt.Sprintf("batchers=%v", withBatchers), func(t *testing.T) {
			rec := acker.NewRecorder(false)
			src := &gridSource{feeds: 3, perFeed: 700, ack: rec}
			o := pipeline.Options[uint64, uint64]{
				Name:     "exactly-once",
				Producer: producer.Options[uint64]{Source: src, Concurrency: 3},
				Processors: processor.Options[uint64, uint64]{
					Concurrency: 4,
					Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
						if m.Data%13 == 0 {
							return 0, errors.New("unlucky")
						}
						m.SetBatchKey(strconv.FormatUint(m.Data%5, 10))
						if m.Data%17 == 0 {
							m.SetBatcher("other")
						}
						return m.Data, nil
					},
				},
			}
			if withBatchers {
				fail := func(_ context.Context, b []*message.Message[uint64], _ message.BatchInfo) error {
					for _, m := range b {
						if m.Data%7 == 0 {
							m.Fail(errors.New("seven"))
						}
					}
					return nil
				}
				o.Batchers = []batcher.Options[uint64]{
					{Name: "default", BatchSize: 50, BatchTimeout: 20 * time.Millisecond, Concurrency: 2, Handle: fail},
					{Name: "other", BatchSize: 10, BatchTimeout: 20 * time.Millisecond, Handle: fail},
				}
			}
			p := mustNew(t, o)
			if err := p.Run(ctxT(t, 30*time.Second)); err != nil {
				t.Fatalf("Run: %v", err)
			}
			total := 3 * 3 * 700
			assertExactlyOnce(t, rec, total)
			for _, o := range rec.Failed() {
				id := o.ID
				if id%13 != 0 && !(withBatchers && id%7 == 0) {
					t.Fatalf("message %x failed with %v but should have succeeded", id, o.Err)
				}
			}
			for _, o := range rec.Successful() {
				if o.ID%13 == 0 || (withBatchers && o.ID%7 == 0) {
					t.Fatalf("message %x succeeded but should have failed", o.ID)
				}
			}
		})
	}
}

// Guarantee: the permit window bound holds for every consumer: read-ahead
// never exceeds max(Initial, Threshold+Refill), the first grant is Initial
// and every refill is exactly Refill.
func TestFlowWindowBound(t *testing.T) {
	for _, flow := range []producer.Flow{{}, {Initial: 10, Threshold: 3, Refill: 4}, {Initial: 8, Threshold: 2, Refill: 20}} {
		flow := flow.WithDefaults()
		t.Run(fmt.Sprintf("%d-%d-%d", flow.Initial, flow.Threshold, flow.Refill), func(t *testing.T) {
			rec := acker.NewRecorder(false)
			src := &gridSource{feeds: 2, perFeed: 600, ack: rec}
			var slow atomic.Int64
			p := mustNew(t, pipeline.Options[uint64, uint64]{
				Name:     "flow",
				Producer: producer.Options[uint64]{Source: src, Concurrency: 2, Flow: flow},
				Processors: processor.Options[uint64, uint64]{
					Concurrency: 2, MaxDemand: 3,
					Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
						// Slow down now and then so buffers fill up.
						if slow.Add(1)%97 == 0 {
							time.Sleep(2 * time.Millisecond)
						}
						return m.Data, nil
					},
				},
			})
			if err := p.Run(ctxT(t, 30*time.Second)); err != nil {
				t.Fatalf("Run: %v", err)
			}
			assertExactlyOnce(t, rec, 2*2*600)
			bound := flow.MaxWindow()
			recs := src.records()
			if len(recs) != 4 {
				t.Fatalf("saw %d feeds, want 4", len(recs))
			}
			for name, r := range recs {
				if r.maxOutstanding > bound {
					t.Errorf("feed %s: read-ahead reached %d, bound is max(Initial, Threshold+Refill) = %d", name, r.maxOutstanding, bound)
				}
				if len(r.grants) == 0 || r.grants[0] != flow.Initial {
					t.Fatalf("feed %s: first grant %v, want Initial=%d", name, r.grants, flow.Initial)
				}
				for i, g := range r.grants[1:] {
					if g != flow.Refill {
						t.Fatalf("feed %s: grant %d was %d, want Refill=%d", name, i+1, g, flow.Refill)
					}
				}
				if r.delivered != 600 {
					t.Fatalf("feed %s delivered %d, want 600", name, r.delivered)
				}
			}
		})
	}
}

// Guarantee: Stop drains: every message in flight when Stop is called is
// handled and acknowledged, and a batch waiting for its timeout is flushed
// with trigger flush.
func TestStopDrainsInFlightMessages(t *testing.T) {
	rec := acker.NewRecorder(false)
	src := &gridSource{feeds: 2, perFeed: 0, ack: rec} // unlimited: runs until stopped
	var handled atomic.Int64
	var mu sync.Mutex
	triggers := map[message.Trigger]int{}
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:     "drain",
		Producer: producer.Options[uint64]{Source: src, Concurrency: 2},
		Processors: processor.Options[uint64, uint64]{
			Concurrency: 2,
			Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				handled.Add(1)
				return m.Data, nil
			},
		},
		Batchers: []batcher.Options[uint64]{{
			Name: "default", BatchSize: 1_000_000, BatchTimeout: time.Hour,
			Handle: func(_ context.Context, b []*message.Message[uint64], info message.BatchInfo) error {
				mu.Lock()
				triggers[info.Trigger] += len(b)
				mu.Unlock()
				return nil
			},
		}},
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "more than 500 messages handled", func() bool { return handled.Load() > 500 })
	if err := p.Stop(ctxT(t, 20*time.Second)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// Every message a feed delivered was handled and acknowledged.
	delivered := 0
	for _, r := range src.records() {
		delivered += r.delivered
	}
	if delivered == 0 || rec.Total() != delivered || int(handled.Load()) != delivered {
		t.Fatalf("delivered %d, handled %d, acknowledged %d: a drain must handle and ack everything delivered", delivered, handled.Load(), rec.Total())
	}
	assertExactlyOnce(t, rec, delivered)
	mu.Lock()
	defer mu.Unlock()
	if triggers[message.TriggerFlush] != delivered || len(triggers) != 1 {
		t.Fatalf("batch triggers %v, want all %d messages flushed by the drain", triggers, delivered)
	}
}

// Guarantee: past the shutdown timeout, messages not yet handled stay
// unacknowledged: none is acknowledged without being handled, and Stop
// reports ErrShutdownTimeout.
func TestShutdownTimeoutLeavesUnhandledUnacked(t *testing.T) {
	rec := acker.NewRecorder(false)
	src := &gridSource{feeds: 1, perFeed: 0, ack: rec}
	var handled sync.Map
	var started atomic.Int64
	release := make(chan struct{})
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:            "timeout",
		ShutdownTimeout: 200 * time.Millisecond,
		Producer:        producer.Options[uint64]{Source: src},
		Processors: processor.Options[uint64, uint64]{
			Concurrency: 1, MaxDemand: 1,
			Handle: func(ctx context.Context, m *message.Message[uint64]) (uint64, error) {
				if started.Add(1) == 5 {
					// Stuck handler: only the shutdown timeout gets us out.
					select {
					case <-release:
					case <-ctx.Done():
						return 0, ctx.Err()
					}
				}
				handled.Store(m.Data, true)
				return m.Data, nil
			},
		},
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "5 handlers started", func() bool { return started.Load() >= 5 })
	err := p.Stop(ctxT(t, 20*time.Second))
	close(release)
	if !errors.Is(err, pipeline.ErrShutdownTimeout) {
		t.Fatalf("Stop = %v, want ErrShutdownTimeout", err)
	}
	delivered := src.records()["s0-f0"].delivered
	if rec.Total() >= delivered {
		t.Fatalf("acknowledged %d of %d delivered; the queued ones must stay unacknowledged", rec.Total(), delivered)
	}
	for _, o := range rec.Successful() {
		if _, ok := handled.Load(o.ID); !ok {
			t.Fatalf("message %d acknowledged as successful without being handled", o.ID)
		}
	}
	for id, n := range rec.Counts() {
		if n != 1 {
			t.Fatalf("message %d acknowledged %d times", id, n)
		}
	}
}

// Guarantee: a pipeline whose sources are exhausted drains and stops by
// itself; Run returns nil.
func TestExhaustedSourceStopsPipeline(t *testing.T) {
	rec := acker.NewRecorder(false)
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:       "exhausted",
		Producer:   producer.Options[uint64]{Source: &gridSource{feeds: 1, perFeed: 10, ack: rec}},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	ctx := ctxT(t, 10*time.Second)
	if err := p.Run(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("Run = %v (context: %v), want nil before the context ends", err, ctx.Err())
	}
	assertExactlyOnce(t, rec, 10)
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after Run returned")
	}
}

// Guarantee: with PartitionBy, messages with the same key are handled by the
// same processor, in the order they were produced.
func TestPartitionByKeepsPerKeyOrder(t *testing.T) {
	const keys = 8
	rec := acker.NewRecorder(false)
	var mu sync.Mutex
	seen := map[string][]uint64{}
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:     "partition",
		Producer: producer.Options[uint64]{Source: &gridSource{feeds: 1, perFeed: 4000, ack: rec}},
		Processors: processor.Options[uint64, uint64]{
			Concurrency: 4,
			PartitionBy: func(m *message.Message[uint64]) string { return strconv.FormatUint(m.Data%keys, 10) },
			Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				k := strconv.FormatUint(m.Data%keys, 10)
				mu.Lock()
				seen[k] = append(seen[k], m.Data)
				mu.Unlock()
				return m.Data, nil
			},
		},
	})
	if err := p.Run(ctxT(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	assertExactlyOnce(t, rec, 4000)
	for k, ids := range seen {
		if !slices.IsSorted(ids) {
			t.Fatalf("key %s handled out of order: %v", k, ids[:min(len(ids), 20)])
		}
		if len(ids) != 4000/keys {
			t.Fatalf("key %s: %d messages, want %d", k, len(ids), 4000/keys)
		}
	}
}

// Guarantee: a handler error or panic fails that message only, and the
// pipeline keeps handling the others.
func TestHandlerErrorAndPanicFailOnlyThatMessage(t *testing.T) {
	p := mustNew(t, pipeline.Options[int, int]{
		Name: "failures",
		Processors: processor.Options[int, int]{
			Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				switch m.Data {
				case 1:
					return 0, errors.New("boom")
				case 2:
					panic("kaboom")
				}
				return m.Data * 10, nil
			},
		},
	})
	ctx := ctxT(t, 10*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	res, err := p.Test(ctx, 0, 1, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].Data != 0 || res[3].Err != nil || res[3].Data != 30 {
		t.Fatalf("healthy messages: %+v %+v", res[0], res[3])
	}
	if res[1].Err == nil || res[1].Err.Error() != "boom" {
		t.Fatalf("message 1: err %v, want boom", res[1].Err)
	}
	var pe *message.PanicError
	if !errors.As(res[2].Err, &pe) || pe.Value != "kaboom" || len(pe.Stack) == 0 {
		t.Fatalf("message 2: err %v, want a *message.PanicError for kaboom with a stack", res[2].Err)
	}
	// Still alive after the panic.
	res, err = p.Test(ctx, 4)
	if err != nil || res[0].Data != 40 {
		t.Fatalf("after a panic: %+v %v", res, err)
	}
}

// Guarantee: a failing source is restarted with backoff, and when it fails
// more than MaxRestarts times within Window the pipeline stops with a
// *producer.RestartError saying why.
func TestFailingSourceRestartsThenGivesUp(t *testing.T) {
	errBroker := errors.New("broker unreachable")
	src := &gridSource{feeds: 1, perFeed: 1, ack: acker.Discard, fail: func(int) error { return errBroker }}
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name: "restarts",
		Producer: producer.Options[uint64]{Source: src, Restart: producer.Restart{
			MaxRestarts: 2, Window: time.Minute, Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		}},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	err := p.Run(ctxT(t, 10*time.Second))
	var re *producer.RestartError
	if !errors.As(err, &re) || !errors.Is(err, producer.ErrTooManyRestarts) || !errors.Is(err, errBroker) {
		t.Fatalf("Run = %v, want a *producer.RestartError wrapping ErrTooManyRestarts and the source error", err)
	}
	if re.Stage != "restarts.producer.0" || re.Restarts != 2 {
		t.Fatalf("RestartError = %+v, want stage restarts.producer.0 after 2 restarts", re)
	}
	src.mu.Lock()
	runs := src.runs
	src.mu.Unlock()
	if runs != 3 {
		t.Fatalf("source ran %d times, want 3 (first run + 2 restarts)", runs)
	}
}

// Guarantee: a source that fails and then recovers keeps the pipeline
// running and its messages still arrive.
func TestSourceRecoversAfterRestart(t *testing.T) {
	rec := acker.NewRecorder(false)
	var calls atomic.Int64
	src := &gridSource{feeds: 1, perFeed: 50, ack: rec, fail: func(int) error {
		if calls.Add(1) == 1 {
			return errors.New("transient")
		}
		return nil
	}}
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:       "recover",
		Producer:   producer.Options[uint64]{Source: src, Restart: producer.Restart{Backoff: time.Millisecond}},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	if err := p.Run(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	assertExactlyOnce(t, rec, 50)
}
