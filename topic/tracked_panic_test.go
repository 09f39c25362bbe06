package topic_test

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/topic"
)

// newLoggingTracked returns a tracked publisher of a new topic, of a
// timeout of a second, one publish in flight and the failure log interval
// every (0: the default), logging as text to the returned lines, and a
// balanced subscriber of that topic.
func newLoggingTracked(t *testing.T, every time.Duration) (*topic.Subscription[int], *topic.TrackedPublisher[int], *logtest.Lines) {
	t.Helper()
	var logged logtest.Lines
	h := newIntTopic(t, topic.Options{})
	sub := subscribeInt(t, h, topic.Balanced("g"))
	p := newTracked(t, h, topic.TrackedOptions{Timeout: time.Second, MaxInFlight: 1, FailureLogInterval: every,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	return sub, p, &logged
}

// publishAndAck publishes 1 on p with done, receives it on sub and acks
// it, which settles the publish, calling done: the Ack returns nil
// whatever done does. It returns the item acked.
func publishAndAck(t *testing.T, sub *topic.Subscription[int], p *topic.TrackedPublisher[int], done func(topic.Result)) topic.Item[int] {
	t.Helper()
	if err := p.PublishFunc(t.Context(), 1, done); err != nil {
		t.Fatal(err)
	}
	it, err := sub.Receive(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Ack(it.ID); err != nil {
		t.Fatalf("Ack whose done panicked = %v, want nil", err)
	}
	return it
}

// wantLine fails t unless line holds every one of subs.
func wantLine(t *testing.T, what, line string, subs ...string) {
	t.Helper()
	for _, want := range subs {
		if !strings.Contains(line, want) {
			t.Fatalf("%s: log line %q does not contain %q", what, line, want)
		}
	}
}

// panickedLine is what the line of a done callback that panicked, told
// outcome, holds: the topic, the outcome, the panic and its stack.
func panickedLine(outcome topic.ReceiptOutcome) []string {
	return []string{"level=ERROR", "done callback panicked", "topic=t", "outcome=" + outcome.String(),
		`"panic: done given ` + outcome.String() + `"`, "stack="}
}

// panicking returns a done callback that counts its calls in calls and
// panics with the outcome it is given.
func panicking(calls *atomic.Int32) func(topic.Result) {
	return func(r topic.Result) {
		calls.Add(1)
		panic("done given " + r.Outcome.String())
	}
}

// Guarantee: a done callback that panics is contained whichever goroutine
// settled its publish (a subscriber's Ack, the timeout goroutine, Close):
// that goroutine goes on, the Ack or Close returns normally, the publish
// stays settled once with the outcome done was given, and its in-flight
// slot is free. The panics cost a few error lines on the publisher's
// Logger, not one each: the first, with its stack, the topic and the
// outcome; the like ones within the default FailureLogInterval are only
// counted, and Close logs their count.
func TestPanickingDoneCallbackIsLoggedAndContained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sub, p, logged := newLoggingTracked(t, 0)
		var calls atomic.Int32
		done := panicking(&calls)
		// expect checks that the publish just settled called done once
		// more (calls in all), with its slot free, and that lines error
		// lines were logged in all.
		expect := func(step string, calls0 int32, lines int) {
			t.Helper()
			if c := calls.Load(); c != calls0 {
				t.Fatalf("%s: done called %d times in all, want %d", step, c, calls0)
			}
			if got := logged.All(); len(got) != lines {
				t.Fatalf("%s: %d log lines after %d panics, want %d: %q", step, len(got), calls0, lines, got)
			}
			if n := p.InFlight(); n != 0 {
				t.Fatalf("%s: InFlight = %d after the publish settled, want 0", step, n)
			}
		}

		// Settled by a subscriber's Ack: the first panic is logged.
		it := publishAndAck(t, sub, p, done)
		expect("ack", 1, 1)
		wantLine(t, "ack", logged.All()[0], panickedLine(topic.Acked)...)
		if err := sub.Ack(it.ID); !errors.Is(err, topic.ErrMessageNotTracked) {
			t.Fatalf("second Ack = %v, want ErrMessageNotTracked (settled once)", err)
		}

		// Settled by the timeout goroutine, twice, within the interval: it
		// outlives the first panic, and the panics are held back.
		for i, calls0 := range []int32{2, 3} {
			if err := p.PublishFunc(t.Context(), 2+i, done); err != nil {
				t.Fatal(err)
			}
			if _, err := sub.Receive(t.Context()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // past the timeout
			synctest.Wait()
			expect("timeout", calls0, 1)
		}

		// Settled by Close, which logs the count of the panics held back.
		if err := p.PublishFunc(t.Context(), 4, done); err != nil {
			t.Fatal(err)
		}
		it, err := sub.Receive(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
		expect("close", 4, 2)
		wantLine(t, "close", logged.All()[1], "level=ERROR", "done callback panicked", logburst.HeldBackSuffix, "topic=t", "held_back=3")
		if err := sub.Ack(it.ID); !errors.Is(err, topic.ErrMessageNotTracked) || calls.Load() != 4 {
			t.Fatalf("Ack after Close = %v with done called %d times, want ErrMessageNotTracked and 4 (settled once)", err, calls.Load())
		}
	})
}

// Guarantee: a burst of done callbacks that panic within the publisher's
// FailureLogInterval costs one error line, with the stack; the first
// panic after the interval is logged again, with its own stack, and
// counts the ones held back (held_back); a negative interval logs every
// panic.
func TestABurstOfPanickingDoneCallbacksCostsOneLinePerInterval(t *testing.T) {
	const n = 5
	synctest.Test(t, func(t *testing.T) {
		sub, p, logged := newLoggingTracked(t, time.Minute)
		var calls atomic.Int32
		done := panicking(&calls)
		for range n - 1 {
			publishAndAck(t, sub, p, done)
		}
		time.Sleep(30 * time.Second) // past the default interval, within this one
		publishAndAck(t, sub, p, done)
		lines := logged.All()
		if len(lines) != 1 {
			t.Fatalf("%d log lines after a burst of %d panics within the interval, want 1: %q", len(lines), n, lines)
		}
		wantLine(t, "burst", lines[0], panickedLine(topic.Acked)...)
		if strings.Contains(lines[0], logburst.HeldBackKey) {
			t.Fatalf("the first line %q counts lines held back before it", lines[0])
		}

		time.Sleep(time.Minute) // past the interval
		publishAndAck(t, sub, p, done)
		lines = logged.All()
		if len(lines) != 2 {
			t.Fatalf("%d log lines after a panic past the interval, want 2: %q", len(lines), lines)
		}
		wantLine(t, "after the interval", lines[1], append(panickedLine(topic.Acked), fmt.Sprintf("held_back=%d", n-1))...)
		p.Close()
		if got := logged.All(); len(got) != 2 {
			t.Fatalf("Close logged %q with nothing held back, want nothing", got[2:])
		}
		if c := calls.Load(); c != n+1 {
			t.Fatalf("done called %d times, want %d", c, n+1)
		}
	})

	// In a bubble too: each publish is acked before its timeout of a
	// second, however long the machine stalls the test between the two.
	synctest.Test(t, func(t *testing.T) {
		sub, p, logged := newLoggingTracked(t, -1)
		var calls atomic.Int32
		for range n {
			publishAndAck(t, sub, p, panicking(&calls))
		}
		if c := logged.Count("done callback panicked", "stack="); c != n {
			t.Fatalf("%d lines with the stack after %d panics with a negative FailureLogInterval, want one each: %q", c, n, logged.All())
		}
	})
}

// Guarantee: a done callback that ends its goroutine (runtime.Goexit, as
// t.FailNow does) as it is told of a timeout costs one error log line
// with the stack of the exit: the publish stays settled as TimedOut with
// its in-flight slot free, and later publishes still time out. A second
// exit within the FailureLogInterval is only counted, and Close logs the
// count.
func TestDoneCallbackThatExitsOnTimeoutLeavesTimeoutsGoing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sub, p, logged := newLoggingTracked(t, 0)
		var outcomes []topic.ReceiptOutcome // written by the timeout goroutine, read after synctest.Wait
		done := func(r topic.Result) {
			outcomes = append(outcomes, r.Outcome)
			if len(outcomes) <= 2 {
				runtime.Goexit()
			}
		}
		for i := range 3 {
			if err := p.PublishFunc(t.Context(), i, done); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
			if _, err := sub.Receive(t.Context()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // past the timeout
			synctest.Wait()
			if len(outcomes) != i+1 || outcomes[i] != topic.TimedOut {
				t.Fatalf("after publish %d timed out, done was told %v, want TimedOut once each", i, outcomes)
			}
			if n := p.InFlight(); n != 0 {
				t.Fatalf("InFlight = %d after publish %d timed out, want 0", n, i)
			}
		}
		lines := logged.All()
		if len(lines) != 1 {
			t.Fatalf("%d log lines after two exits within the interval, want one for the first: %q", len(lines), lines)
		}
		wantLine(t, "exit", lines[0], "level=ERROR", "ended the timeout goroutine", "topic=t", "outcome="+topic.TimedOut.String(), "stack=")
		p.Close()
		lines = logged.All()
		if len(lines) != 2 {
			t.Fatalf("%d log lines after Close, want the exit and the count of the one held back: %q", len(lines), lines)
		}
		wantLine(t, "close", lines[1], "level=ERROR", "ended the timeout goroutine", logburst.HeldBackSuffix, "topic=t", "held_back=1")
	})
}

// Guarantee: a tracked publisher without a Logger logs a done callback's
// panic to slog.Default(), never nowhere.
func TestPanickingDoneCallbackWithoutALoggerIsLoggedOnTheDefaultLogger(t *testing.T) {
	logged := logtest.CaptureDefault(t)
	h := newIntTopic(t, topic.Options{})
	sub := subscribeInt(t, h, topic.Balanced("g"))
	p := newTracked(t, h, topic.TrackedOptions{Timeout: time.Second, MaxInFlight: 1})
	publishAndAck(t, sub, p, func(topic.Result) { panic("done") })
	logged.Want(t, 1, "done callback panics on slog.Default()", "level=ERROR", "done callback panicked", "topic=t")
}

// Guarantee: a done callback that ends its goroutine (runtime.Goexit, as
// t.FailNow does) as Close tells it its publish is closed ends the
// goroutine that called Close, as it would without a publisher, but not
// the closing: it costs one error log line with the stack of the exit,
// the publish stays settled as TopicClosed, and Close settles the other
// publishes still pending (their receipts report TopicClosed) before that
// goroutine ends, freeing every in-flight slot.
func TestDoneCallbackThatExitsOnCloseLeavesTheClosingGoing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged logtest.Lines
		h := newIntTopic(t, topic.Options{})
		subscribeInt(t, h, topic.Balanced("g"))
		p := newTracked(t, h, topic.TrackedOptions{Timeout: time.Hour, MaxInFlight: 2,
			Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		var told []topic.ReceiptOutcome
		if err := p.PublishFunc(t.Context(), 1, func(r topic.Result) {
			told = append(told, r.Outcome)
			runtime.Goexit()
		}); err != nil {
			t.Fatal(err)
		}
		rc, err := p.Publish(t.Context(), 2)
		if err != nil {
			t.Fatal(err)
		}
		closeOnItsOwnGoroutine(p)
		if len(told) != 1 || told[0] != topic.TopicClosed {
			t.Fatalf("done was told %v, want TopicClosed once", told)
		}
		select {
		case <-rc.Done():
		default:
			t.Fatal("the other publish is still pending after Close's goroutine ended")
		}
		if r, _ := rc.Result(); r.Outcome != topic.TopicClosed {
			t.Fatalf("the other publish settled as %v, want TopicClosed", r.Outcome)
		}
		if n := p.InFlight(); n != 0 {
			t.Fatalf("InFlight = %d after Close, want 0", n)
		}
		lines := logged.All()
		if len(lines) != 1 {
			t.Fatalf("%d log lines, want one for the exit: %q", len(lines), lines)
		}
		for _, want := range []string{"level=ERROR", "ended the goroutine closing the publisher", "topic=t", "outcome=" + topic.TopicClosed.String(), "stack="} {
			if !strings.Contains(lines[0], want) {
				t.Fatalf("log line %q does not contain %q", lines[0], want)
			}
		}
	})
}

// closeOnItsOwnGoroutine closes p on a goroutine of its own, which a done
// callback may end (runtime.Goexit), and returns once that goroutine ended.
func closeOnItsOwnGoroutine(p *topic.TrackedPublisher[int]) {
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		p.Close()
	}()
	<-ended
}

// Guarantee: done callbacks that all end their goroutine (runtime.Goexit)
// as one Close tells them their publishes are closed cost two error
// lines, not one each: the first exit, with its stack, and, as the
// closing ends, the count of the others held back within the
// FailureLogInterval.
func TestDoneCallbacksThatExitOnCloseCostTheFirstLineAndTheCountOfTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const publishes = 3
		var logged logtest.Lines
		h := newIntTopic(t, topic.Options{})
		subscribeInt(t, h, topic.Balanced("g"))
		p := newTracked(t, h, topic.TrackedOptions{Timeout: time.Hour, MaxInFlight: publishes,
			Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		var exits atomic.Int32
		for i := range publishes {
			if err := p.PublishFunc(t.Context(), i, func(topic.Result) {
				exits.Add(1)
				runtime.Goexit()
			}); err != nil {
				t.Fatal(err)
			}
		}
		closeOnItsOwnGoroutine(p)
		if n := exits.Load(); n != publishes {
			t.Fatalf("%d done callbacks told of the close, want %d", n, publishes)
		}
		lines := logged.All()
		if len(lines) != 2 {
			t.Fatalf("%d log lines for %d exits on Close, want 2: the first exit and the count of the others: %q", len(lines), publishes, lines)
		}
		wantLine(t, "first exit", lines[0], "level=ERROR", "ended the goroutine closing the publisher", "topic=t", "stack=")
		wantLine(t, "count", lines[1], "level=ERROR", "ended the goroutine closing the publisher", logburst.HeldBackSuffix,
			"topic=t", fmt.Sprintf("held_back=%d", publishes-1))
	})
}
