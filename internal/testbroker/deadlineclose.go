package testbroker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// CloseDeadline is the deadline a DeadlineClose gives its source's Close,
// and CloseMargin how much past it and the source's documented grace a
// test lets that Close return: room for a machine that stalls the test
// process for a second or more, still below one backoff of a client
// whose test sets its backoffs to ten seconds.
const (
	CloseDeadline = 300 * time.Millisecond
	CloseMargin   = 4 * time.Second
)

// DeadlineClose is a source whose Close runs with a context of
// CloseDeadline, whatever the pipeline gives it, and sends how long it
// took on Took.
type DeadlineClose[T any] struct {
	producer.Source[T]
	Took chan time.Duration
}

// ClosingByDeadline returns src as a DeadlineClose.
func ClosingByDeadline[T any](src producer.Source[T]) DeadlineClose[T] {
	return DeadlineClose[T]{src, make(chan time.Duration, 1)}
}

// Close closes the source with a context of CloseDeadline.
func (s DeadlineClose[T]) Close(context.Context) error {
	ctx, cancel := context.WithTimeout(context.Background(), CloseDeadline)
	defer cancel()
	start := time.Now()
	err := s.Source.Close(ctx)
	s.Took <- time.Since(start)
	return err
}

// ClosesByDeadline runs closeFn with a context of CloseDeadline while the
// broker holds a command's answer, and fails t unless it returned an error
// wrapping context.DeadlineExceeded within CloseMargin past that deadline
// (the Pulsar side documents no grace: its Close leaves what is still
// closing to the background). what names the call and the command held in
// the failure. It waits for closeFn for at most HungGrace, so a closing
// that waits for the held answer fails the test without hanging it.
func ClosesByDeadline(t testing.TB, what string, closeFn func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CloseDeadline)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- closeFn(ctx) }()
	select {
	case err := <-done:
		took := time.Since(start)
		if past := took - CloseDeadline; past > CloseMargin {
			t.Errorf("%s took %v, %v past its %v deadline, want at most %v past it", what, took.Round(time.Millisecond), past.Round(time.Millisecond), CloseDeadline, CloseMargin)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s = %v, want an error wrapping context.DeadlineExceeded", what, err)
		}
	case <-time.After(CloseDeadline + HungGrace):
		t.Errorf("%s still runs %v past its %v deadline", what, HungGrace, CloseDeadline)
	}
}

// ClosesByDeadlineWhileHeld starts call, whose context ends at t's
// cleanup (which then waits for it to return), waits until b withholds a
// command (the call's, which the test made b withhold), and checks
// closeFn with ClosesByDeadline.
func ClosesByDeadlineWhileHeld(t testing.TB, b *pulsartest.Broker, what string, call, closeFn func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	called := make(chan struct{})
	go func() {
		defer close(called)
		_ = call(ctx)
	}()
	t.Cleanup(func() { cancel(); <-called })
	wait.Within(t, PulsarFaultPatience, "a command of "+what+" withheld", func() bool { return b.Stats().Withheld > 0 })
	ClosesByDeadline(t, "Close with "+what+" withheld", closeFn)
}

// AwaitHeld waits, at most wait.Deadline, for the request of key that
// HoldFirst holds, and reports whether it arrived. A LeaveGroup, which
// only a member's Close sends, is not waited for: AwaitHeld waits instead
// until claimed reports that the member holds its partitions (state
// describes it when it does not), and fails t otherwise.
func AwaitHeld(t testing.TB, key kmsg.Key, held <-chan struct{}, claimed func() bool, state func() string) bool {
	t.Helper()
	if key == kmsg.LeaveGroup {
		wait.For(t, "the member to claim its partitions", claimed, state)
		return true
	}
	select {
	case <-held:
		return true
	case <-time.After(wait.Deadline):
		return false
	}
}
