package pulsartopic_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// Guarantee: a Subscribe whose client never returns from subscribing
// fails once Options.SubscribeTimeout has passed, with an *Error wrapping
// sources/pulsar's ErrSubscribeTimeout and context.DeadlineExceeded, and
// logs one ERROR line naming the subscription, the topic and the timeout;
// the backend's Close then returns without waiting for the call; and the
// consumer the call makes once it returns is closed, not left subscribed.
func TestASubscribeTheClientNeverReturnsFromFailsAfterTheSubscribeTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	br := testbroker.Pulsar(t)
	hc := testbroker.HangPulsarSubscribe(t, br, func(co pulsar.ConsumerOptions) bool { return co.SubscriptionName == "g" })
	var lines logtest.Lines
	o := testOptions(br, topic.Codec[int](topic.IntCodec{}))
	o.ServiceURL, o.Client = "", hc
	o.SubscribeTimeout = timeout
	o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
	be := newBackend(t, o)
	h := newHandle(t, be, "hung", topic.Options{})

	began := time.Now()
	sub, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
	elapsed := time.Since(began)
	if err == nil {
		sub.Close()
	}
	var perr *pulsartopic.Error
	if !errors.As(err, &perr) || !errors.Is(err, spulsar.ErrSubscribeTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a Subscribe the client never returns from = %v, want an *Error wrapping ErrSubscribeTimeout and context.DeadlineExceeded", err)
	}
	if elapsed < timeout || elapsed > timeout+patience {
		t.Errorf("the Subscribe returned after %v, want Options.SubscribeTimeout (%v)", elapsed, timeout)
	}
	full := be.TopicName("hung")
	lines.Want(t, 1, "lines for the abandoned Subscribe", "level=ERROR", "did not return within its timeout",
		`subscription \"g\"`, full, "timeout="+timeout.String())

	hc.CloseWhileHung(t, be.Close, patience)
	hc.ReleaseAndWaitClosed(t, br, full, "g", patience)
}

// Guarantee: a Subscribe whose client never returns from subscribing
// returns once its context is cancelled, long before
// Options.SubscribeTimeout, with a *topic.TopicError wrapping
// context.Canceled, and has subscribed nothing: Stats shows no group, and
// the consumer the call makes once it returns is closed.
func TestASubscribeTheClientNeverReturnsFromReturnsWhenItsContextEnds(t *testing.T) {
	const timeout = 10 * time.Minute
	br := testbroker.Pulsar(t)
	hc := testbroker.HangPulsarSubscribe(t, br, func(co pulsar.ConsumerOptions) bool { return co.SubscriptionName == "g" })
	be := hungBackend(t, br, hc, timeout)
	h := newHandle(t, be, "hung", topic.Options{})

	sub, err := cancelWhileHung(t, hc, "Subscribe", timeout, func(ctx context.Context) (*topic.Subscription[int], error) {
		return h.Subscribe(ctx, topic.Balanced("g"), topic.SubscriberOptions{})
	})
	if sub != nil {
		sub.Close()
	}
	var te *topic.TopicError
	if !errors.As(err, &te) || !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled Subscribe the client never returns from = %v, want a *topic.TopicError wrapping context.Canceled", err)
	}
	if st := h.Stats(); st.BalancedGroups != 0 {
		t.Errorf("Stats after the cancelled Subscribe: %d groups, want none", st.BalancedGroups)
	}
	hc.ReleaseAndWaitClosed(t, br, be.TopicName("hung"), "g", patience)
}

// hungBackend returns a backend on br whose client is hc and whose
// Options.SubscribeTimeout is timeout. hc's hung call is released before
// the backend's Close, which waits for it.
func hungBackend(t *testing.T, br *pulsartest.Broker, hc *testbroker.HangingClient, timeout time.Duration) *pulsartopic.Backend[int] {
	t.Helper()
	o := testOptions(br, topic.Codec[int](topic.IntCodec{}))
	o.ServiceURL, o.Client = "", hc
	o.SubscribeTimeout = timeout
	be := newBackend(t, o)
	t.Cleanup(hc.Release)
	return be
}

// cancelWhileHung makes call with a context that it cancels once hc's hung
// call has begun, and returns call's results, failing the test if call
// does not return within patience of the cancel (timeout is the
// backend's SubscribeTimeout, for the message).
func cancelWhileHung[R any](t *testing.T, hc *testbroker.HangingClient, what string, timeout time.Duration, call func(context.Context) (R, error)) (R, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		r   R
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := call(ctx)
		done <- result{r, err}
	}()
	select {
	case <-hc.Began:
	case <-time.After(patience):
		t.Fatal("the client's subscribe never began")
	}
	cancel()
	select {
	case res := <-done:
		return res.r, res.err
	case <-time.After(patience):
		t.Fatalf("%s still waiting %v after its context was cancelled (SubscribeTimeout %v)", what, patience, timeout)
		panic("unreachable")
	}
}
