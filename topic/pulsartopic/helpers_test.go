package pulsartopic_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// patience bounds every wait for something that must happen.
const patience = 20 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// testOptions are backend options for a broker, with short timeouts and no
// send timeout (whose timer outlives a closed producer in pulsar-client-go
// v0.21.0).
func testOptions[T any](b *pulsartest.Broker, codec topic.Codec[T]) pulsartopic.Options[T] {
	o := pulsartopic.Options[T]{
		ServiceURL:          b.URL(),
		Codec:               codec,
		SendTimeout:         -1,
		NackRedeliveryDelay: 50 * time.Millisecond,
		Logger:              testbroker.PulsarLogger(),
		Admin: pulsartopic.AdminFunc(func(_ context.Context, name string, n int) error {
			return b.CreateTopic(name, n)
		}),
	}
	o.ClientOptions.OperationTimeout = 5 * time.Second
	o.ClientOptions.ConnectionTimeout = 5 * time.Second
	return o
}

// newBackend starts a backend on b, closed at t's cleanup.
func newBackend[T any](t testing.TB, o pulsartopic.Options[T]) *pulsartopic.Backend[T] {
	t.Helper()
	be, err := pulsartopic.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := be.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return be
}

// quietClientLogger is testbroker.PulsarLogger() for pulsar-client-go's own logging.
func quietClientLogger() plog.Logger { return plog.NewLoggerWithSlog(testbroker.PulsarLogger()) }

// testClient is a client of the test's own on b, for Options.Client,
// closed at t's cleanup.
func testClient(t testing.TB, b *pulsartest.Broker) pulsar.Client {
	t.Helper()
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: b.URL(), OperationTimeout: 5 * time.Second,
		ConnectionTimeout: 5 * time.Second, Logger: quietClientLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// patientBackend starts a backend on b, closed at t's cleanup, whose
// client waits a minute for each of the broker's answers and keeps a
// connection the broker stopped reading open that long: a call that waits
// for the client rather than its context shows.
func patientBackend(t testing.TB, b *pulsartest.Broker) *pulsartopic.Backend[int] {
	t.Helper()
	o := testOptions[int](b, topic.IntCodec{})
	o.ClientOptions.OperationTimeout = time.Minute
	o.ClientOptions.KeepAliveInterval = time.Minute
	return newBackend(t, o)
}

// reconnectionsEnd makes t, once the rest of its cleanup has run (call it
// first), wait within patience until every goroutine started under t has
// ended. A test that drops the connections and closes the backend without
// waiting for its producer to reconnect (testbroker.PulsarReopened) calls
// it: pulsar-client-go (v0.21.0) reconnects a producer on a goroutine no
// Close waits for, and a producer closed while that goroutine looks its
// topic up leaves the lookup retrying for up to the client's operation
// timeout after the backend's Close has returned.
func reconnectionsEnd(t *testing.T) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		var left error
		wait.Within(t, patience, "the goroutines started under the test to end", func() bool {
			left = goleak.Find(before, ignoreGrabConn)
			return left == nil
		}, func() string { return left.Error() })
	})
}
