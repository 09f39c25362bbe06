package producer_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: a Feed Stage.NewFeed did not make (a zero value) acts as a
// closed feed instead of panicking or blocking: Acquire returns
// ErrFeedClosed at once, TryAcquire grants nothing, TryDeliver reports
// false, Deliver drops, Withdraw finds nothing, and Close and
// FlushInFlight do nothing.
func TestAZeroFeedActsAsAClosedOne(t *testing.T) {
	var f producer.Feed[int]
	m := message.New(1, acker.Discard, 1)
	calls := []struct {
		name string
		call func() error
	}{
		{"Acquire", func() error {
			if _, err := f.Acquire(t.Context(), 1); !errors.Is(err, producer.ErrFeedClosed) {
				return fmt.Errorf("%v, want ErrFeedClosed", err)
			}
			return nil
		}},
		{"TryAcquire", func() error { return want(f.TryAcquire(1) == 0, "granted permits") }},
		{"TryDeliver", func() error { return want(!f.TryDeliver(m), "took the message") }},
		{"Deliver", func() error { f.Deliver(m); return nil }},
		{"Withdraw", func() error { return want(f.Withdraw() == 0, "withdrew messages") }},
		{"WithdrawAppend", func() error { return want(len(f.WithdrawAppend(nil)) == 0, "withdrew messages") }},
		{"FlushInFlight", func() error { f.FlushInFlight()(); return nil }},
		{"Close", func() error { f.Close(); f.Close(); return nil }},
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, c := range calls {
		done := make(chan error, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- fmt.Errorf("panicked: %v", r)
				}
			}()
			done <- c.call()
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s on a zero Feed: %v", c.name, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s on a zero Feed did not return", c.name)
		}
	}
}

// want returns an error saying what happened unless ok.
func want(ok bool, what string) error {
	if ok {
		return nil
	}
	return errors.New(what)
}

// Guarantee: a Stage the producer did not make (a zero value) registers
// no feed instead of panicking: NewFeed returns a feed that acts as a
// closed one, calls no grant, and says so on slog.Default().
func TestNewFeedOnAZeroStageReturnsAClosedFeed(t *testing.T) {
	lines := logtest.CaptureDefault(t)
	var s producer.Stage[int]
	var f *producer.Feed[int]
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("NewFeed on a zero Stage panicked: %v", r)
			}
		}()
		f = s.NewFeed("p0", func(n int) { t.Errorf("grant(%d) on a zero Stage's feed", n) })
	}()
	if _, err := f.Acquire(t.Context(), 1); !errors.Is(err, producer.ErrFeedClosed) {
		t.Errorf("Acquire on a zero Stage's feed = %v, want ErrFeedClosed", err)
	}
	if f.TryDeliver(message.New(1, acker.Discard, 1)) {
		t.Error("a zero Stage's feed took a message")
	}
	lines.Want(t, 1, "the warning", "gets no permits", "feed=p0")
}
