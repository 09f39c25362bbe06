package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

func pushOnly(t *testing.T, batchers ...batcher.Options[uint64]) *pipeline.Pipeline[uint64, uint64] {
	t.Helper()
	return mustNew(t, pipeline.Options[uint64, uint64]{
		Name:       "push",
		Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: identity},
		Batchers:   batchers,
	})
}

// Guarantee: a pipeline runs once: Start twice fails, Push before Start and
// after Stop fails with the matching sentinel.
func TestLifecycleErrors(t *testing.T) {
	p := pushOnly(t)
	ctx := ctxT(t, 10*time.Second)
	if err := p.Push(ctx, message.New[uint64](1, nil, 1)); !errors.Is(err, pipeline.ErrNotStarted) {
		t.Fatalf("Push before Start = %v, want ErrNotStarted", err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); !errors.Is(err, pipeline.ErrAlreadyStarted) {
		t.Fatalf("second Start = %v, want ErrAlreadyStarted", err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("second Stop = %v", err)
	}
	if err := p.Push(ctx, message.New[uint64](1, nil, 1)); !errors.Is(err, pipeline.ErrStopped) {
		t.Fatalf("Push after Stop = %v, want ErrStopped", err)
	}
	if _, err := p.Test(ctx, 1); !errors.Is(err, pipeline.ErrStopped) {
		t.Fatalf("Test after Stop = %v, want ErrStopped", err)
	}
}

// Guarantee: Stop before Start is a no-op that leaves nothing running.
func TestStopBeforeStart(t *testing.T) {
	p := pushOnly(t)
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed")
	}
	if err := p.Start(context.Background()); !errors.Is(err, pipeline.ErrAlreadyStarted) {
		t.Fatalf("Start after Stop = %v, want ErrAlreadyStarted", err)
	}
}

// Guarantee: a Pipeline that New did not build (the zero Pipeline) never
// panics and never blocks: Start, Run, Stop, Push, Test and the rate-limit
// methods return ErrNotBuilt, the snapshots are empty, Done is closed, and
// nothing is started.
func TestZeroPipelineReturnsErrNotBuilt(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	var p pipeline.Pipeline[uint64, uint64]
	call := func(name string, f func() error) {
		t.Helper()
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			err = f()
		}()
		if !errors.Is(err, pipeline.ErrNotBuilt) {
			t.Errorf("%s on the zero Pipeline = %v, want ErrNotBuilt", name, err)
		}
	}
	call("Stop", func() error { return p.Stop(ctx) })
	call("Start", func() error { return p.Start(ctx) })
	call("Run", func() error { return p.Run(ctx) })
	call("Push", func() error { return p.Push(ctx, message.New[uint64](1, nil, 1)) })
	call("Test", func() error { _, err := p.Test(ctx, 1); return err })
	call("SetRateLimit", func() error { return p.SetRateLimit(nil) })
	call("UpdateRateLimit", func() error { return p.UpdateRateLimit(func(*producer.RateLimit) {}) })
	call("ResetRateLimit", func() error { return p.ResetRateLimit() })
	call("the snapshots", func() error {
		if rl, st, ss, tp := p.RateLimit(), p.SourceStatus(), p.Stats(), p.Topology(); rl != nil || st != nil || ss.Name != "" || tp.Name != "" {
			return fmt.Errorf("RateLimit %v, SourceStatus %v, Stats %q, Topology %q: want nothing", rl, st, ss.Name, tp.Name)
		}
		return pipeline.ErrNotBuilt
	})
	select {
	case <-p.Done():
	default:
		t.Error("Done of the zero Pipeline is not closed: a caller waiting on it would wait forever")
	}
}

// Guarantee: Push delivers user-created messages with their own
// acknowledgers, and a push-only pipeline drains them on Stop.
func TestPushDeliversToOwnAcknowledger(t *testing.T) {
	var batches []message.BatchInfo
	p := pushOnly(t, batcher.Options[uint64]{Name: "default", BatchSize: 1000, BatchTimeout: time.Hour,
		Handle: func(_ context.Context, b []*message.Message[uint64], info message.BatchInfo) error {
			batches = append(batches, info) // one batch processor: no race
			return nil
		}})
	ctx := ctxT(t, 10*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	a, b := acker.NewRecorder(false), acker.NewRecorder(false)
	var msgs []*message.Message[uint64]
	for i := range uint64(100) {
		ack := a
		if i%2 == 1 {
			ack = b
		}
		msgs = append(msgs, message.New(i, ack, i))
	}
	if err := p.Push(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Total() != 50 || b.Total() != 50 {
		t.Fatalf("acknowledgers saw %d and %d outcomes, want 50 each", a.Total(), b.Total())
	}
	if len(a.Calls()) != 1 || len(b.Calls()) != 1 {
		t.Fatalf("one batch must give one Ack call per acknowledger, got %d and %d", len(a.Calls()), len(b.Calls()))
	}
	if len(batches) != 1 || batches[0].Trigger != message.TriggerFlush || batches[0].Size != 100 {
		t.Fatalf("batches %+v, want one flushed batch of 100", batches)
	}
}

// Guarantee: a Push of many more messages than the processors' queues hold,
// with PartitionBy, stops calling PartitionBy once its context ends and
// returns ctx's error, rather than computing the key of every message
// first: a large Push returns soon after its context ends, and takes
// nothing once it has.
func TestPushWithPartitionByStopsOnceItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const cancelAt = 10
	var keys atomic.Int64
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name: "large-push",
		Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: identity,
			PartitionBy: func(m *message.Message[uint64]) string {
				if keys.Add(1) == cancelAt {
					cancel() // Push's deadline passes while it is under way
				}
				return strconv.FormatUint(m.Data%5, 10)
			}},
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := acker.NewRecorder(false)
	msgs := make([]*message.Message[uint64], 100_000)
	for i := range msgs {
		msgs[i] = message.New(uint64(i), rec, uint64(i))
	}
	err := p.Push(ctx, msgs...)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Push = %v, want context.Canceled", err)
	}
	if n := keys.Load(); n > int64(len(msgs)/10) {
		t.Fatalf("PartitionBy ran %d times for %d messages, although Push's context ended at its %dth call", n, len(msgs), cancelAt)
	}
	if err := p.Stop(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := rec.Total(); n != 0 {
		t.Fatalf("%d messages acknowledged; Push took none once its context had ended", n)
	}
}

// Guarantee: Test returns each message's outcome with the processed payload;
// TestBatch keeps messages in bulk mode so they are batched together.
func TestTestHelpers(t *testing.T) {
	var infos []message.BatchInfo
	p := mustNew(t, pipeline.Options[string, int]{
		Name: "helpers",
		Processors: processor.Options[string, int]{
			Concurrency: 1,
			Handle: func(_ context.Context, m *message.Message[string]) (int, error) {
				m.SetBatchKey("k")
				if m.Data == "" {
					return 0, errors.New("empty")
				}
				return len(m.Data), nil
			},
		},
		Batchers: []batcher.Options[int]{{Name: "default", BatchSize: 3, BatchTimeout: time.Hour,
			Handle: func(_ context.Context, b []*message.Message[int], info message.BatchInfo) error {
				infos = append(infos, info)
				return nil
			}}},
	})
	ctx := ctxT(t, 10*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)

	res, err := p.Test(ctx, "a", "", "abc")
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Data != 1 || res[0].Err != nil || res[2].Data != 3 || res[0].BatchKey != "k" || res[0].Acks != 1 {
		t.Fatalf("outcomes %+v", res)
	}
	if res[1].Err == nil || res[1].Err.Error() != "empty" {
		t.Fatalf("failed outcome %+v", res[1])
	}
	for _, in := range infos {
		if in.Trigger != message.TriggerFlush {
			t.Fatalf("Test messages must be flushed at once, got trigger %s", in.Trigger)
		}
	}

	infos = nil
	res, err = p.TestBatch(ctx, "x", "yy", "zzz")
	if err != nil || len(res) != 3 {
		t.Fatal(res, err)
	}
	if len(infos) != 1 || infos[0].Size != 3 || infos[0].Trigger != message.TriggerSize {
		t.Fatalf("TestBatch batches %+v, want one batch of 3 by size", infos)
	}
}

// Guarantee: Test gives up with ctx's error when outcomes do not arrive.
func TestTestHelperHonoursContext(t *testing.T) {
	block := make(chan struct{})
	p := mustNew(t, pipeline.Options[int, int]{
		Name: "stuck",
		Processors: processor.Options[int, int]{Handle: func(ctx context.Context, m *message.Message[int]) (int, error) {
			select {
			case <-block:
			case <-ctx.Done():
			}
			return m.Data, nil
		}},
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Test(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Test = %v, want deadline exceeded", err)
	}
	close(block)
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Guarantee: routing to a batcher that does not exist fails that message
// with an error naming it; the others reach their batcher.
func TestUnknownBatcherFailsMessage(t *testing.T) {
	p := mustNew(t, pipeline.Options[string, string]{
		Name: "routes",
		Processors: processor.Options[string, string]{Handle: func(_ context.Context, m *message.Message[string]) (string, error) {
			m.SetBatcher(m.Data)
			return m.Data, nil
		}},
		Batchers:        []batcher.Options[string]{{Name: "s3", Handle: func(context.Context, []*message.Message[string], message.BatchInfo) error { return nil }}},
		ExplicitRouting: true,
	})
	ctx := ctxT(t, 10*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	res, err := p.Test(ctx, "s3", "kafka")
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].Batcher != "s3" {
		t.Fatalf("routed message: %+v", res[0])
	}
	var ube *processor.UnknownBatcherError
	if !errors.As(res[1].Err, &ube) || ube.Batcher != "kafka" || !errors.Is(res[1].Err, processor.ErrUnknownBatcher) {
		t.Fatalf("unroutable message: %+v", res[1])
	}
}

// Guarantee: the failure hooks run before failed messages are acknowledged
// and can change how they are acknowledged.
func TestFailureHooksChangeDisposition(t *testing.T) {
	p := mustNew(t, pipeline.Options[int, int]{
		Name: "hooks",
		Processors: processor.Options[int, int]{
			Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				if m.Data < 0 {
					return 0, errors.New("negative")
				}
				return m.Data, nil
			},
			HandleFailed: func(_ context.Context, failed []*message.Message[int]) {
				for _, m := range failed {
					m.SetDisposition(acker.DispositionDiscard)
				}
			},
		},
		Batchers: []batcher.Options[int]{{
			Name: "default",
			Handle: func(_ context.Context, b []*message.Message[int], _ message.BatchInfo) error {
				return errors.New("sink down")
			},
			HandleFailed: func(_ context.Context, failed []*message.Message[int], _ message.BatchInfo) {
				for _, m := range failed {
					m.SetDisposition(acker.DispositionRetry)
				}
			},
		}},
	})
	ctx := ctxT(t, 10*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	res, err := p.Test(ctx, -1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || res[0].Disposition != acker.DispositionDiscard {
		t.Fatalf("processor failure: %+v, want discard", res[0])
	}
	if res[1].Err == nil || res[1].Err.Error() != "sink down" || res[1].Disposition != acker.DispositionRetry {
		t.Fatalf("batch failure: %+v, want retry with sink down", res[1])
	}
}

// Guarantee: a panicking acknowledger is contained: the pipeline keeps
// running and other acknowledgers still get their outcomes.
func TestAcknowledgerPanicIsContained(t *testing.T) {
	p := pushOnly(t)
	ctx := ctxT(t, 10*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	bad := acker.Func(func(context.Context, []acker.Outcome, []acker.Outcome) { panic("acker bug") })
	good := acker.NewRecorder(false)
	if err := p.Push(ctx, message.New[uint64](1, &bad, 1), message.New[uint64](2, good, 2)); err != nil {
		t.Fatal(err)
	}
	if err := good.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if res, err := p.Test(ctx, 3); err != nil || res[0].Data != 3 {
		t.Fatalf("pipeline after acknowledger panic: %+v %v", res, err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// Guarantee: Topology describes every stage with its concurrency and
// batchers.
func TestTopology(t *testing.T) {
	o := validOptions()
	o.Producer.Concurrency = 2
	o.Producer.RateLimit = &producer.RateLimit{Allowed: 10, Interval: time.Second}
	o.Processors.Concurrency = 3
	o.Batchers = append(o.Batchers, batcher.Options[uint64]{Name: "archive", BatchSize: 7, Concurrency: 2,
		PartitionBy: func(*message.Message[uint64]) string { return "" }, Handle: batchOK})
	p := mustNew(t, o)
	top := p.Topology()
	if len(top.Producer.Stages) != 2 || top.Producer.Stages[1] != "valid.producer.1" || top.Producer.RateLimit.Allowed != 10 {
		t.Fatalf("producer %+v", top.Producer)
	}
	if top.Processors.Concurrency != 3 || len(top.Batchers) != 2 || !top.Batchers[1].Partitioned || top.Batchers[1].BatchSize != 7 {
		t.Fatalf("topology %+v", top)
	}
	s := top.String()
	for _, want := range []string{"pipeline valid", "producer: 2 stage(s)", "processors: 3", "batcher archive: size 7", "partitioned"} {
		if !strings.Contains(s, want) {
			t.Fatalf("Topology.String() = %q, missing %q", s, want)
		}
	}
}

// Guarantee: SetRateLimit takes effect while the pipeline runs: a pipeline
// held at a crawl finishes promptly once the limit is lifted.
func TestSetRateLimitWhileRunning(t *testing.T) {
	rec := acker.NewRecorder(false)
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name: "rate",
		Producer: producer.Options[uint64]{
			Source:    &gridSource{feeds: 1, perFeed: 500, ack: rec},
			RateLimit: &producer.RateLimit{Allowed: 1, Interval: time.Hour},
		},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the first outcome", func() bool { return rec.Total() == 1 })
	// Held back by the limit: one message per hour.
	time.Sleep(20 * time.Millisecond)
	if n := rec.Total(); n != 1 {
		t.Fatalf("%d messages passed a limit of 1 per hour", n)
	}
	if err := p.SetRateLimit(nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("pipeline did not finish after the rate limit was lifted")
	}
	assertExactlyOnce(t, rec, 500)
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Guarantee: a panicking PartitionBy (of the processors or of a batcher)
// fails that message only; the process and the pipeline keep running.
func TestPartitionByPanicFailsMessage(t *testing.T) {
	key := func(m *message.Message[int]) string {
		if m.Data < 0 {
			panic("no key")
		}
		return strconv.Itoa(m.Data % 3)
	}
	p := mustNew(t, pipeline.Options[int, int]{
		Name: "keys",
		Processors: processor.Options[int, int]{
			Concurrency: 2,
			PartitionBy: key,
			Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				if m.Data == 100 {
					return -1, nil // the batcher's key function panics on this one
				}
				return m.Data, nil
			},
		},
		Batchers: []batcher.Options[int]{{Name: "default", Concurrency: 2, PartitionBy: key,
			Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil }}},
	})
	ctx := ctxT(t, 10*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	res, err := p.Test(ctx, 1, -5, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	var pe *message.PanicError
	if !errors.As(res[1].Err, &pe) || pe.Value != "no key" {
		t.Fatalf("processor key panic: %+v", res[1])
	}
	if !errors.As(res[2].Err, &pe) || pe.Value != "no key" {
		t.Fatalf("batcher key panic: %+v", res[2])
	}
	if res[0].Err != nil || res[3].Err != nil || res[3].Data != 2 {
		t.Fatalf("other messages: %+v %+v", res[0], res[3])
	}
}

// slowCloser is a source whose Close takes until its context ends.
type slowCloser struct {
	gridSource
	closeErr chan error
}

func (s *slowCloser) Close(ctx context.Context) error {
	<-ctx.Done()
	s.closeErr <- ctx.Err()
	return nil
}

// Guarantee: when Stop's context ends while the source is closing (after a
// complete drain), Stop reports no shutdown timeout, cancels Close's context
// and returns.
func TestStopContextDuringSourceClose(t *testing.T) {
	rec := acker.NewRecorder(false)
	src := &slowCloser{gridSource: gridSource{feeds: 1, perFeed: 0, ack: rec}, closeErr: make(chan error, 1)}
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:       "closing",
		Producer:   producer.Options[uint64]{Source: src},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "more than 10 outcomes", func() bool { return rec.Total() > 10 })
	// Stop cancels Close's context a quarter of the time left before its
	// own ends (at most CancelGrace): 500ms here, enough for Close and the
	// pipeline's last goroutine to return on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("Stop = %v; the drain was complete, only Close was slow", err)
	}
	if err := <-src.closeErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("Close's context ended with %v, want it cancelled by Stop's context", err)
	}
	delivered := src.records()["s0-f0"].delivered
	assertExactlyOnce(t, rec, delivered)
}
