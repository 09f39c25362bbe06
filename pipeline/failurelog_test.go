package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/stage/failurelog"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
)

// errDown is what a handler returns while what it writes to is down.
var errDown = errors.New("database unreachable")

// failureKind is one kind of failure line and a pipeline that fails every
// message it is given with it: each message is a chunk and a batch of its
// own, so that each makes one failure of the kind.
type failureKind struct {
	msg     string // the message of the kind's lines
	stage   string // the stage that logs it, in a pipeline named "failing"
	attr    string // what the first line carries besides the message
	options func() pipeline.Options[uint64, uint64]
}

func failureKinds() []failureKind {
	base := func() pipeline.Options[uint64, uint64] {
		return pipeline.Options[uint64, uint64]{
			Name:       "failing",
			Processors: processor.Options[uint64, uint64]{Concurrency: 2, MaxDemand: 1, Handle: identity},
			Batchers:   []batcher.Options[uint64]{{Name: "default", BatchSize: 1, Concurrency: 2, Handle: batchOK}},
		}
	}
	with := func(set func(o *pipeline.Options[uint64, uint64])) func() pipeline.Options[uint64, uint64] {
		return func() pipeline.Options[uint64, uint64] {
			o := base()
			set(&o)
			return o
		}
	}
	const processors, batchers = "failing.processor", "failing.batcher.default"
	return []failureKind{
		{"message failed", processors, "error=" + `"` + errDown.Error() + `"`, with(func(o *pipeline.Options[uint64, uint64]) {
			o.Processors.Handle = func(context.Context, *message.Message[uint64]) (uint64, error) { return 0, errDown }
		})},
		{"handler panicked; message failed", processors, "stack=", with(func(o *pipeline.Options[uint64, uint64]) {
			o.Processors.Handle = func(context.Context, *message.Message[uint64]) (uint64, error) { panic(errDown) }
		})},
		{"prepare failed; failing the whole chunk", processors, "error=" + `"` + errDown.Error() + `"`, with(func(o *pipeline.Options[uint64, uint64]) {
			o.Processors.Prepare = func(context.Context, []*message.Message[uint64]) error { return errDown }
		})},
		{"PartitionBy panicked; message failed", processors, "stack=", with(func(o *pipeline.Options[uint64, uint64]) {
			o.Processors.PartitionBy = func(*message.Message[uint64]) string { panic(errDown) }
		})},
		{"PartitionBy panicked; message failed", batchers, "stack=", with(func(o *pipeline.Options[uint64, uint64]) {
			o.Batchers[0].PartitionBy = func(*message.Message[uint64]) string { panic(errDown) }
		})},
		{"Weight panicked; message failed", batchers, "stack=", with(func(o *pipeline.Options[uint64, uint64]) {
			o.Batchers[0].Weight = func(*message.Message[uint64]) int { panic(errDown) }
			o.Batchers[0].MaxWeight = 10
		})},
		{"batch handler failed the batch", batchers, "error=" + `"` + errDown.Error() + `"`, with(func(o *pipeline.Options[uint64, uint64]) {
			o.Batchers[0].Handle = func(context.Context, []*message.Message[uint64], message.BatchInfo) error { return errDown }
		})},
		{"batch handler panicked; failing the whole batch", batchers, "stack=", with(func(o *pipeline.Options[uint64, uint64]) {
			o.Batchers[0].Handle = func(context.Context, []*message.Message[uint64], message.BatchInfo) error { panic(errDown) }
		})},
	}
}

// failing runs o, logging to lines, in the current synctest bubble and
// returns a function that pushes n messages and waits for their outcomes,
// and one that stops the pipeline (which the test's cleanup does
// otherwise).
func failing(t *testing.T, o pipeline.Options[uint64, uint64], lines *logtest.Lines) (push func(n int), stop func()) {
	t.Helper()
	o.Logger = slog.New(slog.NewTextHandler(lines, nil))
	p := mustNew(t, o)
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = p.Stop(ctx)
		}
	})
	rec := acker.NewRecorder(false)
	pushed := 0
	push = func(n int) {
		t.Helper()
		msgs := make([]*message.Message[uint64], n)
		for i := range msgs {
			msgs[i] = message.New(uint64(pushed+i), rec, uint64(pushed+i))
		}
		if err := p.Push(ctx, msgs...); err != nil {
			t.Fatalf("Push: %v", err)
		}
		pushed += n
		if err := rec.Wait(ctx, pushed); err != nil {
			t.Fatal(err)
		}
		if f := rec.FailedCount(); f != pushed {
			t.Fatalf("%d of %d messages failed, want all", f, pushed)
		}
	}
	stop = func() {
		t.Helper()
		stopped = true
		if err := p.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
	}
	return push, stop
}

// first is the first of lines, or "none".
func first(lines []string) string {
	if len(lines) == 0 {
		return "none"
	}
	return lines[0]
}

// kindLines returns the lines of lines whose message is msg, logged by
// stage.
func kindLines(lines *logtest.Lines, msg, stage string) []string {
	var out []string
	for _, l := range lines.Matching(fmt.Sprintf("msg=%q", msg)) {
		if strings.Contains(l, "stage="+stage+" ") {
			out = append(out, l)
		}
	}
	return out
}

// Guarantee: a burst of failures of one kind in one stage is one line,
// which carries everything about the first failure, until the stage stops,
// when one more line says how many like failures it held back; a
// negative FailureLogInterval logs every failure, one line each.
func TestAFailureBurstIsOneLineAndStopCountsTheRest(t *testing.T) {
	const n = 1000
	for _, k := range failureKinds() {
		t.Run(k.stage+"/"+k.msg, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var lines logtest.Lines
				push, stop := failing(t, k.options(), &lines)
				push(n)
				got := kindLines(&lines, k.msg, k.stage)
				if len(got) != 1 || !strings.Contains(got[0], k.attr) || strings.Contains(got[0], logburst.HeldBackKey) {
					t.Fatalf("%d failures logged %d lines of the kind, want 1 with %s; the first: %s", n, len(got), k.attr, first(got))
				}
				stop()
				held := kindLines(&lines, k.msg+logburst.HeldBackSuffix, k.stage)
				if want := fmt.Sprintf("held_back=%d", n-1); len(held) != 1 || !strings.Contains(held[0], want) {
					t.Fatalf("at Stop: %q, want one line with %s", held, want)
				}
			})
		})
	}
	for _, k := range failureKinds() {
		t.Run("every line/"+k.stage+"/"+k.msg, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var lines logtest.Lines
				o := k.options()
				o.FailureLogInterval = -1
				push, stop := failing(t, o, &lines)
				push(n)
				stop()
				if got := kindLines(&lines, k.msg, k.stage); len(got) != n {
					t.Fatalf("%d failures logged %d lines of the kind, want %d", n, len(got), n)
				}
				if held := lines.Matching(logburst.HeldBackKey); len(held) > 0 {
					t.Fatalf("%d lines counting failures held back; the first: %s", len(held), held[0])
				}
			})
		})
	}
}

// Guarantee: once FailureLogInterval has passed since the last line of a
// kind, the next failure of that kind is logged at once, with how many were
// held back since; and the stage has nothing left to say at Stop.
func TestTheFirstFailureAfterTheIntervalCountsTheHeldBack(t *testing.T) {
	for _, every := range []time.Duration{0, 3 * pipeline.DefaultFailureLogInterval} {
		t.Run(fmt.Sprint(every), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := failureKinds()[0]
				var lines logtest.Lines
				o := k.options()
				o.FailureLogInterval = every
				if every == 0 {
					every = pipeline.DefaultFailureLogInterval
				}
				push, stop := failing(t, o, &lines)
				push(1000)
				time.Sleep(every - time.Nanosecond)
				push(1)
				if got := kindLines(&lines, k.msg, k.stage); len(got) != 1 {
					t.Fatalf("%d lines within %v of the first, want it alone; the last: %s", len(got), every, got[len(got)-1])
				}
				time.Sleep(time.Nanosecond)
				push(1)
				got := kindLines(&lines, k.msg, k.stage)
				if len(got) != 2 || !strings.Contains(got[1], "id=1001") || !strings.Contains(got[1], "held_back=1000") {
					t.Fatalf("the failure after %v logged %q, want message 1001 counting 1000 held back", every, got)
				}
				stop()
				if held := kindLines(&lines, k.msg+logburst.HeldBackSuffix, k.stage); len(held) > 0 {
					t.Fatalf("at Stop, with nothing held back: %q", held)
				}
			})
		})
	}
}

// Guarantee: FailureLogInterval takes any value up to its documented
// bound, MaxFailureLogInterval, and a negative one (every line), and
// leaves zero to its default.
func TestFailureLogIntervalBounds(t *testing.T) {
	for _, v := range []time.Duration{pipeline.MaxFailureLogInterval, time.Nanosecond, -1, -pipeline.MaxFailureLogInterval - 1} {
		o := validOptions()
		o.FailureLogInterval = v
		if _, err := pipeline.New(o); err != nil {
			t.Errorf("New rejected failureLogInterval = %v: %v", v, err)
		}
	}
	if got := validOptions().WithDefaults().FailureLogInterval; got != pipeline.DefaultFailureLogInterval {
		t.Errorf("the default failureLogInterval is %v, want %v", got, pipeline.DefaultFailureLogInterval)
	}
}

// Guarantee: a handler, Prepare or batch handler that the shutdown cut
// short, returning its cancelled context's error, is logged as
// interrupted, at INFO, not as a failed message or batch: its messages are
// left for the source to deliver again.
func TestWorkTheShutdownInterruptedIsLoggedAsInterruptedNotFailed(t *testing.T) {
	const n = 2 // one in each of the stage's 2 handlers
	waitCtx := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	cases := []struct {
		name, stage, interrupted, failed string
		set                              func(o *pipeline.Options[uint64, uint64])
	}{
		{"handler", "failing.processor", failurelog.InterruptedLog, "message failed", func(o *pipeline.Options[uint64, uint64]) {
			o.Processors.Handle = func(ctx context.Context, _ *message.Message[uint64]) (uint64, error) { return 0, waitCtx(ctx) }
		}},
		{"prepare", "failing.processor", failurelog.InterruptedLog, "prepare failed; failing the whole chunk", func(o *pipeline.Options[uint64, uint64]) {
			o.Processors.Prepare = func(ctx context.Context, _ []*message.Message[uint64]) error { return waitCtx(ctx) }
		}},
		{"batch handler", "failing.batcher.default", failurelog.BatchInterruptedLog, "batch handler failed the batch", func(o *pipeline.Options[uint64, uint64]) {
			o.Batchers[0].Handle = func(ctx context.Context, _ []*message.Message[uint64], _ message.BatchInfo) error {
				return waitCtx(ctx)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := failureKinds()[0].options()
				o.Processors.Handle = identity
				o.ShutdownTimeout = time.Second
				c.set(&o)
				var lines logtest.Lines
				o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
				p := mustNew(t, o)
				ctx := context.Background()
				if err := p.Start(ctx); err != nil {
					t.Fatalf("Start: %v", err)
				}
				rec := acker.NewRecorder(false)
				msgs := make([]*message.Message[uint64], n)
				for i := range msgs {
					msgs[i] = message.New(uint64(i), rec, uint64(i))
				}
				if err := p.Push(ctx, msgs...); err != nil {
					t.Fatalf("Push: %v", err)
				}
				synctest.Wait()
				if err := p.Stop(ctx); !errors.Is(err, pipeline.ErrShutdownTimeout) {
					t.Fatalf("Stop = %v, want the drain cut short (ErrShutdownTimeout)", err)
				}
				if got := kindLines(&lines, c.failed, c.stage); len(got) > 0 {
					t.Fatalf("the shutdown's interruption was logged as a failure: %s", got[0])
				}
				got := kindLines(&lines, c.interrupted, c.stage)
				if len(got) != 1 || !strings.Contains(got[0], "level=INFO") || !strings.Contains(got[0], "context canceled") {
					t.Fatalf("%d lines %q of stage %s, want one at INFO with the context's error; all lines:\n%s", len(got), c.interrupted, c.stage, strings.Join(lines.All(), "\n"))
				}
				failed := rec.Failed()
				if len(failed) != n || rec.Total() != n {
					t.Fatalf("%d outcomes, %d failed, want %d interrupted", rec.Total(), len(failed), n)
				}
				for _, o := range failed {
					if !acker.Interrupted(o) {
						t.Fatalf("outcome %+v is not interrupted", o)
					}
				}
			})
		})
	}
}

// Guarantee: a failure line says its error once: the message it names is
// logged without the error the line carries on its own (error, or panic
// with its stack).
func TestAFailureLineSaysItsErrorOnce(t *testing.T) {
	for _, k := range failureKinds() {
		t.Run(k.stage+"/"+k.msg, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var lines logtest.Lines
				push, stop := failing(t, k.options(), &lines)
				push(1)
				stop()
				got := kindLines(&lines, k.msg, k.stage)
				if len(got) == 0 {
					t.Fatalf("no %q line; logged:\n%s", k.msg, strings.Join(lines.All(), "\n"))
				}
				if n := strings.Count(got[0], errDown.Error()); n != 1 {
					t.Fatalf("the line says its error %d times, want once: %s", n, got[0])
				}
			})
		})
	}
}
