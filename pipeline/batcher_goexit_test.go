package pipeline_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
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
)

// Guarantee: a batcher's PartitionBy (run by the processor that hands
// messages on) or Weight (run by the batcher partition) that ends its
// goroutine (runtime.Goexit, as t.FailNow does) does not stall the
// pipeline: the messages that goroutine held and had not handed on fail
// with message.ErrHandlerExited, every message reaches its acknowledger
// exactly once, the exit is logged, the messages pushed after it are
// handled, and Stop drains and returns nil.
func TestBatcherKeyOrWeightGoexitFailsHeldMessagesAndStopReturns(t *testing.T) {
	exitOn7 := func(m *message.Message[uint64]) {
		if m.Data == 7 {
			runtime.Goexit()
		}
	}
	cases := []struct {
		name  string
		log   string
		part  func(*message.Message[uint64]) string
		weigh func(*message.Message[uint64]) int
	}{
		{name: "PartitionBy", log: processing.ExitedLog, part: func(m *message.Message[uint64]) string {
			exitOn7(m)
			return strconv.FormatUint(m.Data%3, 10)
		}},
		{name: "Weight", log: batching.PartitionExitedLog, weigh: func(m *message.Message[uint64]) int { exitOn7(m); return 1 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log := &logtest.Records{}
			bo := batcher.Options[uint64]{Name: message.DefaultBatcher, Concurrency: 2,
				BatchSize: 10, BatchTimeout: time.Millisecond, Handle: batchOK,
				PartitionBy: tc.part, Weight: tc.weigh}
			if tc.weigh != nil {
				bo.MaxWeight = 5
			}
			p := mustNew(t, pipeline.Options[uint64, uint64]{
				Name:            "exits",
				Logger:          slog.New(log),
				ShutdownTimeout: time.Minute,
				Processors:      processor.Options[uint64, uint64]{Concurrency: 1, Handle: identity},
				Batchers:        []batcher.Options[uint64]{bo},
			})
			ctx := ctxT(t, 30*time.Second)
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			rec := acker.NewRecorder(false)
			push := func(from, n int) {
				msgs := make([]*message.Message[uint64], n)
				for i := range msgs {
					msgs[i] = message.New(uint64(from+i), rec, uint64(from+i))
				}
				if err := p.Push(ctx, msgs...); err != nil {
					t.Fatal(err)
				}
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				if err := rec.Wait(wctx, from+n); err != nil {
					t.Errorf("%d outcomes of %d reported while the pipeline ran: %v", rec.Total(), from+n, err)
				}
			}
			push(0, 100)
			push(100, 100)
			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			defer scancel()
			if err := p.Stop(sctx); err != nil {
				t.Errorf("Stop = %v, want nil", err)
			}
			assertExactlyOnce(t, rec, 200)
			failed7 := false
			for _, o := range rec.Failed() {
				failed7 = failed7 || o.ID == 7
				if !errors.Is(o.Err, message.ErrHandlerExited) || o.ID >= 100 {
					t.Errorf("message %d failed with %v, want only messages of the first push, with message.ErrHandlerExited", o.ID, o.Err)
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
