package topology_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
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
