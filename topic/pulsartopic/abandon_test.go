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
