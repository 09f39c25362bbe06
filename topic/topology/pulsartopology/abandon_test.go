package pulsartopology_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// abandonTimeout is Options.OperationTimeout in the tests of a call the
// client never returns from.
const abandonTimeout = 2 * time.Second

// hangingBackend returns a backend on br, closed at t's cleanup, with
// Options.OperationTimeout abandonTimeout and a client whose first
// Subscribe that hang matches never returns until released (see
// testbroker.HangPulsarSubscribe), and the lines it logs.
func hangingBackend(t *testing.T, br *pulsartest.Broker, hang func(pulsar.ConsumerOptions) bool) (*pulsartopology.Backend[string], *testbroker.HangingClient, *logtest.Lines) {
	t.Helper()
	hc := testbroker.HangPulsarSubscribe(t, br, hang)
	var lines logtest.Lines
	o := options(br, topic.Codec[string](topic.StringCodec{}))
	o.ServiceURL, o.Client = "", hc
	o.OperationTimeout = abandonTimeout
	o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
	return newBackend(t, o), hc, &lines
}

// abandoned checks that call returned err, after elapsed, once
// abandonTimeout had passed and not much later, wrapping kind,
// ErrAbandoned and context.DeadlineExceeded.
func abandoned(t *testing.T, call string, err, kind error, elapsed time.Duration) {
	t.Helper()
	if !errors.Is(err, kind) || !errors.Is(err, pulsartopology.ErrAbandoned) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s the client never returns from = %v, want an error wrapping %v, ErrAbandoned and context.DeadlineExceeded", call, err, kind)
	}
	if elapsed < abandonTimeout || elapsed > abandonTimeout+patience {
		t.Errorf("%s returned after %v, want Options.OperationTimeout (%v)", call, elapsed, abandonTimeout)
	}
}

// Guarantee: a reader's Subscribe whose client never returns from
// subscribing fails once Options.OperationTimeout has passed, with no
// deadline of its own, with an error wrapping ErrSubscribe, ErrAbandoned
// and context.DeadlineExceeded, and logs one ERROR line naming the
// subscription and the timeout; the backend's Close then returns without
// waiting for the call; and the consumer the call makes once it returns
// is closed, not left subscribed.
func TestASubscribeTheClientNeverReturnsFromIsAbandonedAfterTheOperationTimeout(t *testing.T) {
	br := testbroker.Pulsar(t)
	be, hc, lines := hangingBackend(t, br, func(co pulsar.ConsumerOptions) bool { return co.MessageChannel != nil })
	top := build(t, topology.New("hung-reader"))
	q, err := be.Declare(ctxT(t), top)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	r, err := q.Subscribe(context.Background())
	if err == nil {
		_ = r.Close(ctxT(t))
	}
	abandoned(t, "a Subscribe", err, pulsartopology.ErrSubscribe, time.Since(began))
	lines.Want(t, 1, "lines for the abandoned Subscribe", "level=ERROR", "did not return within the operation timeout",
		`subscription \"hung-reader\"`, "timeout="+abandonTimeout.String())
	hc.CloseWhileHung(t, be.Close, patience)
	hc.ReleaseAndWaitClosed(t, br, be.TopicName("hung-reader"), top.ConsumerGroup(), patience)
}

// Guarantee: a Declare whose client never returns from subscribing the
// consumer group fails once Options.OperationTimeout has passed, with an
// error wrapping ErrDeclare, ErrAbandoned and context.DeadlineExceeded,
// and logs one ERROR line naming the topology and the timeout; the
// backend's Close then returns without waiting for the call; and the
// consumer the call makes once it returns is closed.
func TestADeclareTheClientNeverReturnsFromIsAbandonedAfterTheOperationTimeout(t *testing.T) {
	br := testbroker.Pulsar(t)
	be, hc, lines := hangingBackend(t, br, func(co pulsar.ConsumerOptions) bool { return co.SubscriptionName == "hung-declare" })
	top := build(t, topology.New("hung-declare"))
	began := time.Now()
	_, err := be.Declare(context.Background(), top)
	abandoned(t, "a Declare", err, pulsartopology.ErrDeclare, time.Since(began))
	lines.Want(t, 1, "lines for the abandoned Declare", "level=ERROR", "did not return within the operation timeout",
		`topology \"hung-declare\"`, "timeout="+abandonTimeout.String())
	hc.CloseWhileHung(t, be.Close, patience)
	hc.ReleaseAndWaitClosed(t, br, be.TopicName("hung-declare"), top.ConsumerGroup(), patience)
}
