package pipeline_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: when the processors' PartitionBy ends the goroutine that
// hands messages to them (runtime.Goexit, as t.FailNow does), wherever it
// runs (a source's delivery that goes straight to the processors, the
// producer stage's dispatcher, a Push), every message still gets exactly
// one outcome: those the processors took are handled, the others fail
// with message.ErrHandlerExited and reach their acknowledgers; the
// processors' counters count them as taken in and failed; one error line
// is logged; the messages after the exit are handled and Stop returns
// nil.
func TestProcessorsPartitionByGoexitGivesEveryMessageOneOutcome(t *testing.T) {
	cases := []struct {
		name string
		log  string
		// limit makes the stage hand every delivery over from its
		// dispatcher.
		limit *producer.RateLimit
		push  bool
		// handled are the messages of the first delivery the
		// processors take before the exit: a delivery straight to them
		// hands over a run of one key at a time (the exit comes as the
		// key of message 7 ends the run of message 6), the dispatcher
		// and Push a window of the processors' queues at a time (all
		// ten).
		handled int
	}{
		{name: "direct delivery", log: producer.DeliverExitedLog, handled: 6},
		{name: "dispatcher", log: producer.DispatchExitedLog, limit: &producer.RateLimit{Allowed: 1 << 20, Interval: time.Second}},
		{name: "Push", log: pipeline.PushExitedLog, push: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := acker.NewRecorder(false)
			exitedCh := make(chan struct{})
			src := twoBatchSource(rec, exitedCh)
			opts := producer.Options[uint64]{Source: src, RateLimit: tc.limit,
				Restart: producer.Restart{Backoff: time.Millisecond}}
			if tc.push {
				opts = producer.Options[uint64]{}
			}
			log := &logtest.Records{}
			ctx := ctxT(t, 30*time.Second)
			p := startExitingPartitionBy(t, ctx, opts, log, exitedCh)
			if tc.push {
				done := make(chan error, 1)
				go func() {
					defer close(done)
					done <- p.Push(ctx, tenFrom(rec, 0)...)
				}()
				if err, ok := <-done; ok {
					t.Fatalf("Push returned %v; PartitionBy ended its goroutine", err)
				}
				if err := p.Push(ctx, tenFrom(rec, 100)...); err != nil {
					t.Fatal(err)
				}
			}
			wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			if err := rec.Wait(wctx, 20); err != nil {
				t.Fatalf("%d outcomes of 20 reported: %v (counts %v)", rec.Total(), err, rec.Counts())
			}
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			defer scancel()
			if err := p.Stop(sctx); err != nil {
				t.Errorf("Stop = %v, want nil", err)
			}
			assertExactlyOnce(t, rec, 20)
			failed := map[uint64]bool{}
			for _, o := range rec.Failed() {
				failed[o.ID] = true
				if !errors.Is(o.Err, message.ErrHandlerExited) {
					t.Errorf("message %d failed with %v, want message.ErrHandlerExited", o.ID, o.Err)
				}
			}
			for id := range uint64(10) {
				if want := int(id) >= tc.handled; failed[id] != want {
					t.Errorf("message %d failed: %t, want %t (the processors took the first %d)", id, failed[id], want, tc.handled)
				}
			}
			for id := uint64(100); id < 110; id++ {
				if failed[id] {
					t.Errorf("message %d, delivered after the exit, failed", id)
				}
			}
			st := p.Stats().Processors
			if st.In != 20 || st.Succeeded != uint64(10+tc.handled) || st.Failed.Total() != uint64(10-tc.handled) {
				t.Errorf("processors counted In %d, Succeeded %d, Failed %d; want 20, %d, %d",
					st.In, st.Succeeded, st.Failed.Total(), 10+tc.handled, 10-tc.handled)
			}
			if n := log.Count(slog.LevelError, tc.log); n != 1 {
				t.Errorf("%d log lines %q, want 1", n, tc.log)
			}
		})
	}
}

// exitOn7Acker ends the goroutine of every call that reports message 7
// (runtime.Goexit), and forwards the other calls to rec.
type exitOn7Acker struct{ rec *acker.Recorder }

func (a exitOn7Acker) Ack(ctx context.Context, successful, failed []acker.Outcome) {
	for _, os := range [][]acker.Outcome{successful, failed} {
		for _, o := range os {
			if o.ID == 7 {
				runtime.Goexit()
			}
		}
	}
	a.rec.Ack(ctx, successful, failed)
}

// Guarantee: when the processors' PartitionBy ends the producer stage's
// dispatching goroutine and the acknowledger of the messages it kept from
// the processors ends the goroutine that reports them too, the stage goes
// on dispatching: those outcomes stay unreported (as after any
// acknowledger that ends its goroutine), they are not reported again,
// the messages delivered afterwards are handled, each exit is logged once
// and Stop returns nil.
func TestAcknowledgerGoexitReportingPartitionByExitsLeavesTheStageDispatching(t *testing.T) {
	rec := acker.NewRecorder(false)
	ack := exitOn7Acker{rec: rec}
	exitedCh := make(chan struct{})
	src := twoBatchSource(ack, exitedCh)
	log := &logtest.Records{}
	ctx := ctxT(t, 30*time.Second)
	p := startExitingPartitionBy(t, ctx, producer.Options[uint64]{Source: src,
		RateLimit: &producer.RateLimit{Allowed: 1 << 20, Interval: time.Second}}, log, exitedCh)
	stopOnceHandledAfterExit(t, ctx, p, rec)
	for id, n := range rec.Counts() {
		if n != 1 || id == 7 {
			t.Errorf("message %d reported %d times, want once (and message 7, whose acknowledger exited, never)", id, n)
		}
	}
	if n := log.Count(slog.LevelError, producer.DispatchExitedLog); n != 2 {
		t.Errorf("%d log lines %q, want 2: PartitionBy's exit and the acknowledger's", n, producer.DispatchExitedLog)
	}
}

// startExitingPartitionBy starts a pipeline of two processors whose
// PartitionBy ends its goroutine (runtime.Goexit) once, on message 7,
// closing exited first.
func startExitingPartitionBy(t *testing.T, ctx context.Context, opts producer.Options[uint64], log *logtest.Records, exited chan struct{}) *pipeline.Pipeline[uint64, uint64] {
	t.Helper()
	var once sync.Once
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:            "exits",
		Logger:          slog.New(log),
		ShutdownTimeout: 10 * time.Second,
		Producer:        opts,
		Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: identity,
			PartitionBy: func(m *message.Message[uint64]) string {
				exits := false
				if m.Data == 7 {
					once.Do(func() { exits = true; close(exited) })
				}
				if exits {
					runtime.Goexit()
				}
				return strconv.FormatUint(m.Data%3, 10)
			}},
	})
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

// stopOnceHandledAfterExit waits for the ten messages from 100 on,
// delivered after a goroutine exited, to be handled, then stops p,
// failing t unless Stop returns nil.
func stopOnceHandledAfterExit(t *testing.T, ctx context.Context, p *pipeline.Pipeline[uint64, uint64], rec *acker.Recorder) {
	t.Helper()
	wait.For(t, "the messages delivered after the exit to be handled", func() bool {
		n := 0
		for _, o := range rec.Successful() {
			if o.ID >= 100 {
				n++
			}
		}
		return n == 10
	})
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	if err := p.Stop(sctx); err != nil {
		t.Errorf("Stop = %v, want nil", err)
	}
}

// tenFrom returns ten messages, from from on, acknowledged to ack.
func tenFrom(ack acker.Acknowledger, from uint64) []*message.Message[uint64] {
	msgs := make([]*message.Message[uint64], 10)
	for i := range msgs {
		id := from + uint64(i)
		msgs[i] = message.New(id, ack, id)
	}
	return msgs
}

// twoBatchSource delivers, in one delivery each, the ten messages from 0
// on, whose hand-over ends a goroutine, and once exited is closed the ten
// from 100 on. When the goroutine ended is the first run's own, the run
// fails and the next one delivers the second batch.
func twoBatchSource(ack acker.Acknowledger, exited <-chan struct{}) producer.SourceFunc[uint64] {
	var runs atomic.Int32
	return func(ctx context.Context, st *producer.Stage[uint64]) error {
		feed := st.NewFeed("exits", nil)
		deliver := func(from uint64) bool {
			for got := 0; got < 10; {
				n, err := feed.Acquire(ctx, 10-got)
				if err != nil {
					return false
				}
				got += n
			}
			feed.Deliver(tenFrom(ack, from)...)
			return true
		}
		if runs.Add(1) == 1 {
			if !deliver(0) {
				return nil
			}
			select {
			case <-exited:
			case <-ctx.Done():
				return nil
			}
		}
		deliver(100)
		<-ctx.Done()
		return nil
	}
}

// Guarantee: a message that failed before the processors' PartitionBy
// ended the goroutine handing it over (here one whose PartitionBy
// panicked, in the same Push) keeps its own error: the exit fails with
// message.ErrHandlerExited only the messages that had not failed.
func TestProcessorsPartitionByGoexitKeepsAnEarlierFailure(t *testing.T) {
	rec := acker.NewRecorder(false)
	ctx := ctxT(t, 30*time.Second)
	var once sync.Once
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:   "exits",
		Logger: slog.New(slog.DiscardHandler),
		Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: identity,
			PartitionBy: func(m *message.Message[uint64]) string {
				switch m.Data {
				case 3:
					panic("no key")
				case 7:
					exits := false
					once.Do(func() { exits = true })
					if exits {
						runtime.Goexit()
					}
				}
				return strconv.FormatUint(m.Data%3, 10)
			}},
	})
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Push(ctx, tenFrom(rec, 0)...)
	}()
	<-done
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := rec.Wait(wctx, 10); err != nil {
		t.Fatalf("%d outcomes of 10 reported: %v", rec.Total(), err)
	}
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	if err := p.Stop(sctx); err != nil {
		t.Errorf("Stop = %v, want nil", err)
	}
	assertExactlyOnce(t, rec, 10)
	for _, o := range rec.Failed() {
		var pe *message.PanicError
		if panicked := errors.As(o.Err, &pe); panicked != (o.ID == 3) || o.ID != 3 && !errors.Is(o.Err, message.ErrHandlerExited) {
			t.Errorf("message %d failed with %v, want message 3 with its PartitionBy's panic, the others with message.ErrHandlerExited", o.ID, o.Err)
		}
	}
	if n := len(rec.Failed()); n != 10 {
		t.Errorf("%d messages failed, want all 10 (the processors take a window at a time)", n)
	}
}
