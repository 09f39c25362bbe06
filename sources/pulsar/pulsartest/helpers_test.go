package pulsartest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pulsar-client-go (v0.21.0) producer_partition.go: failTimeoutMessages
		// loops on `for range timer.C` and checks for a closed producer only
		// when its SendTimeout timer (default 30s) fires; Producer.Close does
		// not stop it, so it outlives every closed producer for up to
		// SendTimeout. Producers the client creates itself (DLQ, retry) use
		// the default timeout, so the tests cannot disable it everywhere.
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionProducer).failTimeoutMessages"),
		reconnectNotice,
	)
}

// reconnectNotice ignores a goroutine pulsar-client-go (v0.21.0) leaves
// behind (consumer_partition.go, grabConn): each time a consumer
// (re)connects, the client starts a goroutine that sends on the consumer's
// connectedCh (room for one) with no way out; when the consumer is closed right after a reconnection (the
// tests that unload a topic or close consumers from the broker's side),
// nobody receives and the goroutine stays blocked for the process's life.
var reconnectNotice = goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionConsumer).grabConn.func1")

// startBroker starts a broker closed at the end of the test.
func startBroker(t *testing.T) *Broker {
	t.Helper()
	return startBrokerWith(t, Options{})
}

// startBrokerWith starts a broker with opts (logging nowhere unless
// opts.Logger is set), closed at the end of the test.
func startBrokerWith(t *testing.T, opts Options) *Broker {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	b, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// newClient returns a pulsar-client-go client on b with short timeouts,
// closed at the end of the test.
func newClient(t *testing.T, b *Broker) pulsar.Client {
	t.Helper()
	return newClientWaiting(t, b, 5*time.Second)
}

// newClientWaiting returns a client on b as newClient does, whose calls
// wait up to operation for the broker's answer.
func newClientWaiting(t *testing.T, b *Broker, operation time.Duration) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:               b.URL(),
		OperationTimeout:  operation,
		ConnectionTimeout: 5 * time.Second,
		Logger:            plog.DefaultNopLogger(),
	})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func uniqueTopic(t *testing.T) string {
	name := strings.NewReplacer("/", "_", "=", "_").Replace(t.Name())
	return fmt.Sprintf("persistent://public/default/%s-%d", name, time.Now().UnixNano())
}

func receive(t *testing.T, ctx context.Context, c pulsar.Consumer) pulsar.Message {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := c.Receive(rctx)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return m
}

// receiveUntil returns c's next message, or false once ctx has ended or
// done reports that every expected message arrived and c then has nothing
// more for a moment (so that extra deliveries are still counted). A quiet
// spell alone does not end the receiving: on a busy machine the broker can
// take long to dispatch the next message.
func receiveUntil(ctx context.Context, c pulsar.Consumer, done func() bool) (pulsar.Message, bool) {
	for {
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		m, err := c.Receive(rctx)
		cancel()
		if err == nil {
			return m, true
		}
		if ctx.Err() != nil || done() {
			return nil, false
		}
	}
}

// reached reports whether *n, guarded by mu, has reached want.
func reached(mu *sync.Mutex, n *int, want int) func() bool {
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		return *n >= want
	}
}

// noMessage asserts that nothing arrives on c within d.
func noMessage(t *testing.T, c pulsar.Consumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if m, err := c.Receive(ctx); err == nil {
		t.Fatalf("unexpected message %q (%v)", m.Payload(), m.ID())
	}
}
