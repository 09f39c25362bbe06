package pipeline_test

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/stage/batching"
	"github.com/boulevard-go/boulevard/internal/stage/processing"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/telemetry"
)

// Guarantee: a PipelineStart or PipelineStop hook that ends its goroutine
// (runtime.Goexit, as t.FailNow does) does not leave the pipeline
// unstoppable: after a PipelineStart exit (which ends the goroutine that
// called Start) the pipeline runs all the same and handles what is pushed;
// either way Stop drains and returns nil, Done closes, and one error line
// naming the hook is logged on the pipeline's logger.
func TestPipelineStartOrStopHookGoexitLeavesThePipelineStoppable(t *testing.T) {
	exit := func(context.Context, telemetry.Pipeline) { runtime.Goexit() }
	for _, hook := range []string{"PipelineStart", "PipelineStop"} {
		t.Run(hook, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &logtest.Records{}
				hooks := &telemetry.Hooks{}
				if hook == "PipelineStart" {
					hooks.PipelineStart = exit
				} else {
					hooks.PipelineStop = exit
				}
				p := mustNew(t, pipeline.Options[uint64, uint64]{
					Name:            "exits",
					Logger:          slog.New(log),
					ShutdownTimeout: time.Minute,
					Telemetry:       hooks,
					Processors:      processor.Options[uint64, uint64]{Concurrency: 1, Handle: identity},
					Batchers: []batcher.Options[uint64]{{Name: message.DefaultBatcher, Concurrency: 1,
						BatchSize: 10, BatchTimeout: time.Millisecond, Handle: batchOK}},
				})
				ctx := context.Background()
				returned := false
				startDone := make(chan struct{})
				go func() {
					defer close(startDone)
					if err := p.Start(ctx); err != nil {
						t.Errorf("Start = %v", err)
					}
					returned = true
				}()
				<-startDone
				if want := hook != "PipelineStart"; returned != want {
					t.Errorf("Start returned to its caller: %v, want %v", returned, want)
				}
				rec := acker.NewRecorder(false)
				msgs := make([]*message.Message[uint64], 30)
				for i := range msgs {
					msgs[i] = message.New(uint64(i), rec, uint64(i))
				}
				if err := p.Push(ctx, msgs...); err != nil {
					t.Fatal(err)
				}
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if err := rec.Wait(wctx, len(msgs)); err != nil {
					t.Errorf("%d outcomes of %d reported while the pipeline ran: %v", rec.Total(), len(msgs), err)
				}
				sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
				defer scancel()
				if err := p.Stop(sctx); err != nil {
					t.Errorf("Stop = %v, want nil", err)
				}
				select {
				case <-p.Done():
				case <-time.After(time.Minute):
					t.Fatal("Done did not close")
				}
				assertExactlyOnce(t, rec, len(msgs))
				if n := len(rec.Successful()); n != len(msgs) {
					t.Errorf("%d of %d messages succeeded", n, len(msgs))
				}
				if n := log.Count(slog.LevelError, pipeline.HookExitedLog); n != 1 {
					t.Errorf("%d log lines %q, want 1", n, pipeline.HookExitedLog)
				}
			})
		})
	}
}

// Guarantee: a ChunkStop or BatchStop hook that ends its goroutine
// (runtime.Goexit) once, called after the outcomes of its chunk or batch
// were reported, changes no outcome: every message succeeds, once; the
// stage goes on in a new goroutine, Stop drains and returns nil, and one
// error line is logged for the exit.
func TestChunkStopOrBatchStopHookGoexitChangesNoOutcome(t *testing.T) {
	for _, hook := range []string{"ChunkStop", "BatchStop"} {
		t.Run(hook, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &logtest.Records{}
				var once sync.Once
				exit := func() { once.Do(runtime.Goexit) }
				hooks := &telemetry.Hooks{}
				if hook == "ChunkStop" {
					hooks.ChunkStop = func(context.Context, telemetry.Chunk) { exit() }
				} else {
					hooks.BatchStop = func(context.Context, telemetry.Batch) { exit() }
				}
				p := mustNew(t, pipeline.Options[uint64, uint64]{
					Name:            "exits",
					Logger:          slog.New(log),
					ShutdownTimeout: time.Minute,
					Telemetry:       hooks,
					Processors:      processor.Options[uint64, uint64]{Concurrency: 1, MaxDemand: 5, Handle: identity},
					Batchers: []batcher.Options[uint64]{{Name: message.DefaultBatcher, Concurrency: 1,
						BatchSize: 5, BatchTimeout: time.Millisecond, Handle: batchOK}},
				})
				ctx := context.Background()
				if err := p.Start(ctx); err != nil {
					t.Fatal(err)
				}
				rec := acker.NewRecorder(false)
				msgs := make([]*message.Message[uint64], 30)
				for i := range msgs {
					msgs[i] = message.New(uint64(i), rec, uint64(i))
				}
				if err := p.Push(ctx, msgs...); err != nil {
					t.Fatal(err)
				}
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if err := rec.Wait(wctx, len(msgs)); err != nil {
					t.Errorf("%d outcomes of %d reported while the pipeline ran: %v", rec.Total(), len(msgs), err)
				}
				if err := p.Stop(wctx); err != nil {
					t.Errorf("Stop = %v, want nil", err)
				}
				assertExactlyOnce(t, rec, len(msgs))
				if n := len(rec.Successful()); n != len(msgs) {
					t.Errorf("%d of %d messages succeeded", n, len(msgs))
				}
				if n := log.Count(slog.LevelError, processing.ExitedLog) + log.Count(slog.LevelError, batching.ExitedLog); n != 1 {
					t.Errorf("%d error lines for the exit, want 1", n)
				}
			})
		})
	}
}

// Guarantee: when the PipelineStart hook ends the goroutine that called
// Run (runtime.Goexit), Run's context keeps its meaning: cancelling it
// stops the pipeline, which drains what was pushed (every message
// acknowledged once), closes Done and logs one line per event (one
// HookExitedLog, one "pipeline stopped").
func TestRunContextStopsThePipelineAfterPipelineStartHookGoexit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &logtest.Records{}
		// The batcher's timeout is long: the messages are still in a batch
		// when the context is cancelled, and only the drain emits it.
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "runexits",
			Logger:          slog.New(log),
			ShutdownTimeout: time.Minute,
			Telemetry: &telemetry.Hooks{
				PipelineStart: func(context.Context, telemetry.Pipeline) { runtime.Goexit() },
			},
			Processors: processor.Options[uint64, uint64]{Concurrency: 1, Handle: identity},
			Batchers: []batcher.Options[uint64]{{Name: message.DefaultBatcher, Concurrency: 1,
				BatchSize: 1000, BatchTimeout: time.Hour, Handle: batchOK}},
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		runDone := make(chan struct{})
		returned := false
		go func() {
			defer close(runDone)
			_ = p.Run(ctx)
			returned = true
		}()
		<-runDone
		if returned {
			t.Error("Run returned to its caller after the PipelineStart hook ended its goroutine")
		}
		rec := acker.NewRecorder(false)
		msgs := make([]*message.Message[uint64], 30)
		for i := range msgs {
			msgs[i] = message.New(uint64(i), rec, uint64(i))
		}
		if err := p.Push(context.Background(), msgs...); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := rec.Total(); n != 0 {
			t.Errorf("%d outcomes reported before Run's context was cancelled, want 0 (the batch is open)", n)
		}
		cancel()
		select {
		case <-p.Done():
		case <-time.After(10 * time.Minute):
			t.Error("Done did not close after Run's context was cancelled")
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			_ = p.Stop(sctx)
		}
		assertExactlyOnce(t, rec, len(msgs))
		if n := len(rec.Successful()); n != len(msgs) {
			t.Errorf("%d of %d messages succeeded", n, len(msgs))
		}
		if err := p.Err(); err != nil {
			t.Errorf("Err = %v, want nil", err)
		}
		if n := log.Count(slog.LevelError, pipeline.HookExitedLog); n != 1 {
			t.Errorf("%d log lines %q, want 1", n, pipeline.HookExitedLog)
		}
		if n := log.Count(slog.LevelInfo, "pipeline stopped"); n != 1 {
			t.Errorf("%d log lines %q, want 1", n, "pipeline stopped")
		}
	})
}
