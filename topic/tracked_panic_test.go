package topic_test

import (
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/topic"
)

// newLoggingTracked returns a tracked publisher of a new topic, of a
// timeout of a second and one publish in flight, logging as text to the
// returned lines, and a balanced subscriber of that topic.
func newLoggingTracked(t *testing.T) (*topic.Subscription[int], *topic.TrackedPublisher[int], *logtest.Lines) {
	t.Helper()
	var logged logtest.Lines
	h := newIntTopic(t, topic.Options{})
	sub := subscribeInt(t, h, topic.Balanced("g"))
	p := newTracked(t, h, topic.TrackedOptions{Timeout: time.Second, MaxInFlight: 1,
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

// Guarantee: a done callback that panics costs one error log line on the
// publisher's Logger, whichever goroutine settled its publish (a
// subscriber's Ack, the timeout goroutine, Close): that goroutine goes on,
// the Ack or Close returns normally, the publish stays settled once with
// the outcome done was given, and its in-flight slot is free.
func TestPanickingDoneCallbackIsLoggedAndContained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sub, p, logged := newLoggingTracked(t)
		var calls atomic.Int32
		done := func(r topic.Result) {
			calls.Add(1)
			panic("done given " + r.Outcome.String())
		}
		// expect checks that the publish just settled called done once
		// more (calls in all) and cost one more error line, which names
		// the topic and outcome.
		expect := func(step string, calls0 int32, outcome topic.ReceiptOutcome) {
			t.Helper()
			if c := calls.Load(); c != calls0 {
				t.Fatalf("%s: done called %d times in all, want %d", step, c, calls0)
			}
			lines := logged.All()
			if len(lines) != int(calls0) {
				t.Fatalf("%s: %d log lines after %d panics, want one each: %q", step, len(lines), calls0, lines)
			}
			last := lines[len(lines)-1]
			for _, want := range []string{"level=ERROR", "done callback panicked", "topic=t", "outcome=" + outcome.String(),
				`"panic: done given ` + outcome.String() + `"`, "stack="} {
				if !strings.Contains(last, want) {
					t.Fatalf("%s: log line %q does not contain %q", step, last, want)
				}
			}
			if n := p.InFlight(); n != 0 {
				t.Fatalf("%s: InFlight = %d after the publish settled, want 0", step, n)
			}
		}

		// Settled by a subscriber's Ack.
		it := publishAndAck(t, sub, p, done)
		expect("ack", 1, topic.Acked)
		if err := sub.Ack(it.ID); !errors.Is(err, topic.ErrMessageNotTracked) {
			t.Fatalf("second Ack = %v, want ErrMessageNotTracked (settled once)", err)
		}

		// Settled by the timeout goroutine, twice: it outlives the first
		// panic.
		for i, calls0 := range []int32{2, 3} {
			if err := p.PublishFunc(t.Context(), 2+i, done); err != nil {
				t.Fatal(err)
			}
			if _, err := sub.Receive(t.Context()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // past the timeout
			synctest.Wait()
			expect("timeout", calls0, topic.TimedOut)
		}

		// Settled by Close.
		if err := p.PublishFunc(t.Context(), 4, done); err != nil {
			t.Fatal(err)
		}
		it, err := sub.Receive(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
		expect("close", 4, topic.TopicClosed)
		if err := sub.Ack(it.ID); !errors.Is(err, topic.ErrMessageNotTracked) || calls.Load() != 4 {
			t.Fatalf("Ack after Close = %v with done called %d times, want ErrMessageNotTracked and 4 (settled once)", err, calls.Load())
		}
	})
}

// Guarantee: a done callback that ends its goroutine (runtime.Goexit, as
// t.FailNow does) as it is told of a timeout costs one error log line
// with the stack of the exit: the publish stays settled as TimedOut with
// its in-flight slot free, and later publishes still time out.
func TestDoneCallbackThatExitsOnTimeoutLeavesTimeoutsGoing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sub, p, logged := newLoggingTracked(t)
		var outcomes []topic.ReceiptOutcome // written by the timeout goroutine, read after synctest.Wait
		done := func(r topic.Result) {
			outcomes = append(outcomes, r.Outcome)
			if len(outcomes) == 1 {
				runtime.Goexit()
			}
		}
		for i := range 2 {
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
			t.Fatalf("%d log lines, want one for the exit: %q", len(lines), lines)
		}
		for _, want := range []string{"level=ERROR", "ended the timeout goroutine", "topic=t", "outcome=" + topic.TimedOut.String(), "stack="} {
			if !strings.Contains(lines[0], want) {
				t.Fatalf("log line %q does not contain %q", lines[0], want)
			}
		}
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
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			p.Close()
		}()
		<-ended
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
