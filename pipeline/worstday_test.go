package pipeline_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/telemetry"
)

// blockingAcknowledger blocks in Ack, ignoring its context, until release
// is closed; entered is closed on the first call.
type blockingAcknowledger struct {
	entered, release chan struct{}
	once             sync.Once
}

func (a *blockingAcknowledger) Ack(context.Context, []acker.Outcome, []acker.Outcome) {
	a.once.Do(func() { close(a.entered) })
	<-a.release
}

// blockingHandler is a slog.Handler whose Handle blocks, whatever its
// context, until release is closed: a logger writing to a pipe nobody
// reads.
type blockingHandler struct{ release chan struct{} }

func (h blockingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h blockingHandler) Handle(context.Context, slog.Record) error { <-h.release; return nil }
func (h blockingHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h blockingHandler) WithGroup(string) slog.Handler             { return h }

// stopWithin stops p with a context whose deadline is d and fails unless
// Stop returns by that deadline; it returns Stop's error.
func stopWithin(t *testing.T, p *pipeline.Pipeline[uint64, uint64], d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	begin := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- p.Stop(ctx) }()
	select {
	case err := <-stopped:
		if took := time.Since(begin); took > d {
			t.Fatalf("Stop took %v, past its %v deadline", took, d)
		}
		return err
	case <-time.After(d + time.Minute):
		t.Fatalf("Stop has not returned a minute after its %v deadline", d)
		return nil
	}
}

// Guarantee: Stop returns by its context's deadline while a message's
// acknowledger blocks and ignores its context, naming the processor that
// called it; the pipeline's Done closes once the acknowledger returns.
func TestStopReturnsByDeadlineWhileAnAcknowledgerBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ack := &blockingAcknowledger{entered: make(chan struct{}), release: make(chan struct{})}
		unblock := sync.OnceFunc(func() { close(ack.release) })
		defer unblock()
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "acking",
			ShutdownTimeout: time.Minute,
			Processors:      processor.Options[uint64, uint64]{Concurrency: 1, MaxDemand: 1, Handle: identity},
		})
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := p.Push(context.Background(), message.New[uint64](1, ack, 1)); err != nil {
			t.Fatal(err)
		}
		<-ack.entered
		err := stopWithin(t, p, 2*time.Second)
		assertStraggler(t, err, pipeline.Straggler{Kind: pipeline.KindProcessor, Stage: "acking.processor", Index: 0})
		unblock()
		<-p.Done()
	})
}

// Guarantee: Stop returns by its context's deadline while the
// PipelineStop hook blocks and ignores its context; the pipeline's Done
// closes once the hook returns.
func TestStopReturnsByDeadlineWhileThePipelineStopHookBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		defer unblock()
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:       "hooked",
			Processors: processor.Options[uint64, uint64]{Handle: identity},
			Telemetry: &telemetry.Hooks{
				PipelineStop: func(context.Context, telemetry.Pipeline) { <-release },
			},
		})
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		stopWithin(t, p, 2*time.Second)
		select {
		case <-p.Done():
			t.Fatal("Done closed while the PipelineStop hook still runs")
		default:
		}
		unblock()
		<-p.Done()
	})
}

// Guarantee: Stop returns by its context's deadline while the pipeline's
// logger blocks, and while a handler ignores its context at the same
// time; the pipeline's Done closes once both return.
func TestStopReturnsByDeadlineWhileTheLoggerBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started, release, unblock := stuckGate()
		defer unblock()
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "logging",
			ShutdownTimeout: time.Minute,
			Logger:          slog.New(blockingHandler{release: release}),
			Processors:      processor.Options[uint64, uint64]{Concurrency: 1, MaxDemand: 1, Handle: stuckHandler(started, release)},
		})
		startErr := make(chan error, 1)
		go func() { startErr <- p.Start(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-startErr:
			if err != nil {
				t.Fatal(err)
			}
		default:
			// Start logs "pipeline started": it returns once the logger
			// does; push from here all the same.
		}
		go func() { _ = p.Push(context.Background(), message.New[uint64](1, nil, 1)) }()
		synctest.Wait()
		err := stopWithin(t, p, 2*time.Second)
		if err == nil {
			t.Fatal("Stop returned nil while a handler still runs")
		}
		unblock()
		<-p.Done()
	})
}

// Guarantee: Stop returns by its context's deadline when several things
// ignore their context at once: a handler, a message's acknowledger, the
// source's Close, the PipelineStop hook and the logger; the pipeline's
// Done closes once they all return.
func TestStopReturnsByDeadlineWhileEverythingBlocksAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started, release, unblock := stuckGate()
		defer unblock()
		ack := &blockingAcknowledger{entered: make(chan struct{}), release: release}
		src := &closeIgnoringSource{release: release}
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "worst",
			ShutdownTimeout: time.Minute,
			Logger:          slog.New(blockingHandler{release: release}),
			Producer:        producer.Options[uint64]{Source: src},
			Processors:      processor.Options[uint64, uint64]{Concurrency: 2, MaxDemand: 1, Handle: stuckHandler(started, release)},
			Telemetry: &telemetry.Hooks{
				PipelineStop: func(context.Context, telemetry.Pipeline) { <-release },
			},
		})
		go func() { _ = p.Start(context.Background()) }() // its log line blocks
		synctest.Wait()
		go func() { _ = p.Push(context.Background(), message.New[uint64](1, nil, 1)) }()
		go func() { _ = p.Push(context.Background(), message.New[uint64](2, ack, 2)) }()
		<-started
		<-ack.entered
		if err := stopWithin(t, p, 2*time.Second); err == nil {
			t.Fatal("Stop returned nil while a handler, an acknowledger and the source's Close still run")
		}
		unblock()
		<-p.Done()
	})
}
