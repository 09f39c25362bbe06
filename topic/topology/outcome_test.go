package topology_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: Decide reads an outcome from the error chain first, then from
// the disposition, so a plain error keeps the meaning dispositions give it,
// and a shutdown interruption is never anything but a requeue.
func TestDecide(t *testing.T) {
	plain := errors.New("boom")
	cases := []struct {
		name    string
		o       acker.Outcome
		want    topology.Outcome
		timeout bool
	}{
		{"success", acker.Outcome{}, topology.OutcomeAck, false},
		{"plain error", acker.Outcome{Err: plain}, topology.OutcomeRetry, false},
		{"plain error, retry disposition", acker.Outcome{Err: plain, Disposition: acker.DispositionRetry}, topology.OutcomeRetry, false},
		{"plain error, discard disposition", acker.Outcome{Err: plain, Disposition: acker.DispositionDiscard}, topology.OutcomeReject, false},
		{"retry", acker.Outcome{Err: topology.Retry(plain)}, topology.OutcomeRetry, false},
		{"reject", acker.Outcome{Err: topology.Reject(plain)}, topology.OutcomeReject, false},
		{"wrapped reject", acker.Outcome{Err: fmt.Errorf("settle: %w", topology.Reject(plain))}, topology.OutcomeReject, false},
		{"reject wins over retry disposition", acker.Outcome{Err: topology.Reject(plain), Disposition: acker.DispositionRetry}, topology.OutcomeReject, false},
		{"defer", acker.Outcome{Err: topology.Defer()}, topology.OutcomeDefer, false},
		{"timeout", acker.Outcome{Err: &topology.TimeoutError{Timeout: time.Second}}, topology.OutcomeRetry, true},
		{"timeout asked to retry", acker.Outcome{Err: topology.Retry(&topology.TimeoutError{Timeout: time.Second})}, topology.OutcomeRetry, true},
		{"interrupted reject", acker.Outcome{Err: acker.WrapShutdown(topology.Reject(context.Canceled))}, topology.OutcomeRequeue, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, timeout := topology.Decide(c.o)
			if got != c.want || timeout != c.timeout {
				t.Errorf("Decide = %s, %v; want %s, %v", got, timeout, c.want, c.timeout)
			}
		})
	}
	if got := topology.Reject(plain).Error(); got != "boom" {
		t.Errorf("Reject(err).Error() = %q, want the failure's own text", got)
	}
	if !errors.Is(topology.Retry(plain), plain) || !errors.Is(topology.Reject(nil), message.ErrFailed) {
		t.Error("outcome errors do not unwrap to their failure")
	}
}

// Guarantee: Decide allocates nothing for a failure: a source decides
// every failed message's outcome, retries included, on its hot path. (A
// TimeoutError unwraps into a slice: a handler that ran out its timeout
// costs that.)
func TestDecideOfAFailureAllocatesNothing(t *testing.T) {
	plain := errors.New("boom")
	for _, err := range []error{plain, topology.Retry(plain), fmt.Errorf("settle: %w", topology.Reject(plain)), topology.Defer()} {
		o := acker.Outcome{Err: err}
		if n := testing.AllocsPerRun(100, func() { topology.Decide(o) }); n != 0 {
			t.Errorf("Decide of %q allocates %v times, want 0", err, n)
		}
	}
}

// Guarantee: the error Defer returns is an *OutcomeError asking for a
// deferral that matches ErrDeferred, also when wrapped, and not
// message.ErrFailed.
func TestDeferMatchesErrDeferred(t *testing.T) {
	err := fmt.Errorf("settle: %w", topology.Defer())
	var oe *topology.OutcomeError
	if !errors.As(err, &oe) || oe.Outcome != topology.OutcomeDefer {
		t.Fatalf("Defer() = %v, want an *OutcomeError asking for a deferral", err)
	}
	if !errors.Is(err, topology.ErrDeferred) || errors.Is(err, message.ErrFailed) {
		t.Errorf("Defer() = %v: errors.Is ErrDeferred %v, ErrFailed %v; want true, false",
			err, errors.Is(err, topology.ErrDeferred), errors.Is(err, message.ErrFailed))
	}
}

// Guarantee: WithTimeout fails a handler that outlives its deadline with a
// *TimeoutError (keeping the handler's error), leaves a prompt handler's
// result alone, and does not turn the pipeline's own cancellation into a
// timeout.
func TestWithTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := topology.WithTimeout(time.Second, func(ctx context.Context, m *message.Message[int]) (int, error) {
			if m.Data == 0 {
				return 1, nil
			}
			<-ctx.Done()
			return 0, fmt.Errorf("query: %w", ctx.Err())
		})
		if v, err := slow(t.Context(), message.New(0, nil, 0)); v != 1 || err != nil {
			t.Errorf("prompt handler = %d, %v", v, err)
		}
		_, err := slow(t.Context(), message.New(1, nil, 0))
		var te *topology.TimeoutError
		if !errors.As(err, &te) || !errors.Is(err, topology.ErrHandlerTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("slow handler error = %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err = slow(ctx, message.New(1, nil, 0))
		if errors.Is(err, topology.ErrHandlerTimeout) || !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled handler error = %v, want context.Canceled and no timeout", err)
		}
	})
}

// Guarantee: WithTimeout with a limit of zero or less sets no deadline:
// the handler runs with the context it is given, and its message does
// not time out.
func TestWithTimeoutOfZeroOrLessSetsNoDeadline(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		h := topology.WithTimeout(d, func(ctx context.Context, m *message.Message[int]) (int, error) {
			if _, ok := ctx.Deadline(); ok || ctx.Err() != nil {
				return 0, fmt.Errorf("the handler's context has a deadline (err %v)", ctx.Err())
			}
			return m.Data, nil
		})
		if v, err := h(t.Context(), message.New(7, nil, 0)); v != 7 || err != nil {
			t.Errorf("WithTimeout(%v) handler = %d, %v, want 7, nil", d, v, err)
		}
	}
}

// Guarantee: an *OutcomeError asks for a retry, a rejection or a deferral
// only; one that names another outcome (its zero value says ack, and
// requeue is the pipeline's shutdown's alone) is a retry, so a failed
// message is never acked, nor delivered again uncounted, on its say-so.
func TestOutcomeErrorAsksOnlyForRetryRejectOrDefer(t *testing.T) {
	plain := errors.New("boom")
	for _, o := range []topology.Outcome{topology.OutcomeAck, topology.OutcomeRequeue, 200} {
		got, _ := topology.Decide(acker.Outcome{Err: &topology.OutcomeError{Outcome: o, Err: plain}})
		if got != topology.OutcomeRetry {
			t.Errorf("Decide(&OutcomeError{Outcome: %s}) = %s, want retry", o, got)
		}
	}
	// A handler that returns a nil *OutcomeError as its error.
	var none *topology.OutcomeError
	if got, _ := topology.Decide(acker.Outcome{Err: fmt.Errorf("settle: %w", none)}); got != topology.OutcomeRetry {
		t.Errorf("Decide(nil *OutcomeError) = %s, want retry", got)
	}
}

// Guarantee: an *OutcomeError made without its Err reads as
// message.ErrFailed, as Reject(nil) does: a handler returning one has its
// message dead-lettered with that text, and neither its error's text nor
// the source's acknowledgement panics.
func TestOutcomeErrorWithoutErrReadsAsFailed(t *testing.T) {
	for _, e := range []*topology.OutcomeError{{Outcome: topology.OutcomeReject}, nil} {
		if got := e.Error(); got != message.ErrFailed.Error() {
			t.Errorf("(%#v).Error() = %q, want %q", e, got, message.ErrFailed.Error())
		}
	}
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		t.Cleanup(func() { _ = m.Close(context.Background()) })
		top, _ := topology.New("bare").DLQ().Build()
		q, _ := m.Declare(t.Context(), top)
		src, p := startPipeline(t, q, func(context.Context, *message.Message[int]) (int, error) {
			return 0, &topology.OutcomeError{Outcome: topology.OutcomeReject}
		})
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		if err := pub.Publish(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		wait.Within(t, time.Minute, "the dead letter", func() bool { return src.Stats().DeadLettered == 1 })
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		r, _ := q.SubscribeDead(t.Context())
		defer r.Close(t.Context())
		buf := make([]topology.Letter[int], 2)
		if n, _ := r.TryReceive(t.Context(), buf); n != 1 || buf[0].Death.Error != message.ErrFailed.Error() {
			t.Errorf("DLQ holds %d letters, the first dead of %+v", n, buf[0].Death)
		}
	})
}

// Guarantee: a HandleDead handler given a message that carries no death
// (a Delivery without Death, or no Delivery) fails it with ErrNotDead,
// without calling the handler.
func TestHandleDeadFailsAMessageWithoutDeath(t *testing.T) {
	called := false
	h := topology.HandleDead(func(context.Context, int, topology.Death) (int, error) {
		called = true
		return 0, nil
	})
	alive := message.New(1, nil, 0)
	alive.Metadata = &topology.Delivery{Topic: "orders"}
	for _, m := range []*message.Message[int]{alive, message.New(2, nil, 0)} {
		if _, err := h(t.Context(), m); !errors.Is(err, topology.ErrNotDead) {
			t.Errorf("HandleDead on a message without death = %v, want ErrNotDead", err)
		}
	}
	if called {
		t.Error("HandleDead called its handler on a message without death")
	}
}

// Guarantee: a source's options left zero default to 10 retries
// (DefaultMaxRetries), batches of at most 64 letters (DefaultMaxBatch)
// and 4096 letters held back (DefaultMaxHeldBack), as documented.
func TestSourceOptionsDefaults(t *testing.T) {
	o := topology.SourceOptions[int]{}.WithDefaults()
	if o.MaxRetries != 10 || o.MaxBatch != 64 || o.MaxHeldBack != 4096 {
		t.Errorf("defaults MaxRetries %d, MaxBatch %d, MaxHeldBack %d, want 10, 64, 4096", o.MaxRetries, o.MaxBatch, o.MaxHeldBack)
	}
}
