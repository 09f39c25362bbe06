package pipeline_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/stage/batching"
	"github.com/boulevard-go/boulevard/internal/stage/processing"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: user code that ends its goroutine (runtime.Goexit, as
// t.FailNow does) in a processor's Handle or Prepare, or in a batch
// handler, with one processor and one batch processor, does not stall the
// pipeline: the messages that goroutine held fail with
// message.ErrHandlerExited, every message reaches its acknowledger exactly
// once, one line is logged on the pipeline's logger, and Stop drains and
// returns nil.
func TestGoexitInUserCodeFailsHeldMessagesAndStopReturns(t *testing.T) {
	exitOn7 := func(msgs ...*message.Message[uint64]) {
		for _, m := range msgs {
			if m.Data == 7 {
				runtime.Goexit()
			}
		}
	}
	cases := []struct {
		name    string
		log     string
		prepare func(context.Context, []*message.Message[uint64]) error
		handle  processor.Handler[uint64, uint64]
		batch   batcher.Handler[uint64]
	}{
		{name: "handler", log: processing.ExitedLog,
			handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) { exitOn7(m); return m.Data, nil }},
		{name: "prepare", log: processing.ExitedLog,
			prepare: func(_ context.Context, msgs []*message.Message[uint64]) error { exitOn7(msgs...); return nil }},
		{name: "batch handler", log: batching.ExitedLog,
			batch: func(_ context.Context, msgs []*message.Message[uint64], _ message.BatchInfo) error {
				exitOn7(msgs...)
				return nil
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log := &logtest.Records{}
			o := pipeline.Options[uint64, uint64]{
				Name:            "exits",
				Logger:          slog.New(log),
				ShutdownTimeout: time.Minute,
				Processors:      processor.Options[uint64, uint64]{Concurrency: 1, Prepare: tc.prepare, Handle: tc.handle},
				Batchers: []batcher.Options[uint64]{{Name: message.DefaultBatcher, Concurrency: 1,
					BatchSize: 10, BatchTimeout: time.Millisecond, Handle: tc.batch}},
			}
			if o.Processors.Handle == nil {
				o.Processors.Handle = identity
			}
			if o.Batchers[0].Handle == nil {
				o.Batchers[0].Handle = batchOK
			}
			p := mustNew(t, o)
			ctx := ctxT(t, 30*time.Second)
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			rec := acker.NewRecorder(false)
			msgs := make([]*message.Message[uint64], 100)
			for i := range msgs {
				msgs[i] = message.New(uint64(i), rec, uint64(i))
			}
			if err := p.Push(ctx, msgs...); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			waited := rec.Wait(wctx, len(msgs))
			if err := p.Stop(ctx); err != nil {
				t.Errorf("Stop = %v, want nil", err)
			}
			if waited != nil {
				t.Fatalf("%d outcomes of %d reported while the pipeline ran: %v", rec.Total(), len(msgs), waited)
			}
			assertExactlyOnce(t, rec, len(msgs))
			failed7 := false
			for _, o := range rec.Failed() {
				failed7 = failed7 || o.ID == 7
				if !errors.Is(o.Err, message.ErrHandlerExited) {
					t.Errorf("message %d failed with %v, want message.ErrHandlerExited", o.ID, o.Err)
				}
			}
			if !failed7 {
				t.Error("message 7, whose user code ended its goroutine, did not fail")
			}
			if n := log.Count(slog.LevelError, tc.log); n != 1 {
				t.Errorf("%d log lines %q, want 1", n, tc.log)
			}
		})
	}
}

// Guarantee: a processors' PartitionBy that ends its goroutine
// (runtime.Goexit) while the source delivers (it runs on the source's
// goroutine, inside the producer stage) does not jam the stage: Stop
// returns by its deadline and the pipeline's Done closes.
func TestPartitionByGoexitOnDeliveryLeavesThePipelineStoppable(t *testing.T) {
	rec := acker.NewRecorder(false)
	src := producer.SourceFunc[uint64](func(ctx context.Context, st *producer.Stage[uint64]) error {
		feed := st.NewFeed("exits", nil)
		for i := range uint64(20) {
			if _, err := feed.Acquire(ctx, 1); err != nil {
				return nil
			}
			feed.Deliver(message.New(i, rec, i))
		}
		<-ctx.Done()
		return nil
	})
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:            "exits",
		Logger:          slog.New(slog.DiscardHandler),
		ShutdownTimeout: time.Second,
		Producer:        producer.Options[uint64]{Source: src},
		Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: identity,
			PartitionBy: func(m *message.Message[uint64]) string {
				if m.Data == 7 {
					runtime.Goexit()
				}
				return "k"
			}},
	})
	ctx := ctxT(t, 30*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rec.Wait(wctx, 7); err != nil {
		t.Fatalf("%d outcomes before the exit, want 7: %v", rec.Total(), err)
	}
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	defer scancel()
	_ = p.Stop(sctx)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the pipeline's Done has not closed 10s after Stop: the producer stage is jammed")
	}
}
