package pulsar

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// brokerAndClient starts a broker and a client of it, both closed when t
// ends.
func brokerAndClient(t *testing.T) (*pulsartest.Broker, pulsar.Client) {
	t.Helper()
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, newTestClient(t, b)
}

// newTestClient is a client of b, closed when t ends.
func newTestClient(t *testing.T, b *pulsartest.Broker) pulsar.Client {
	t.Helper()
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: b.URL(), OperationTimeout: 5 * time.Second,
		Logger: plog.NewLoggerWithSlog(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// The close watch reports every way a consumer can close under the source,
// with the client's cause when the client closed it on its own: a close
// asked for by the application (of the consumer, or of the whole client),
// and the client giving up its reconnection.
func TestCloseWatchReportsEveryClosure(t *testing.T) {
	giveUpAfter := uint(1)
	for _, tc := range []struct {
		name      string
		opts      pulsar.ConsumerOptions
		close     func(b *pulsartest.Broker, client pulsar.Client, c pulsar.Consumer)
		wantCause string // "" for ErrClosedByCall
	}{{
		name:  "consumer closed",
		close: func(_ *pulsartest.Broker, _ pulsar.Client, c pulsar.Consumer) { c.Close() },
	}, {
		name:  "client closed",
		close: func(_ *pulsartest.Broker, client pulsar.Client, _ pulsar.Consumer) { client.Close() },
	}, {
		name: "reconnection given up",
		opts: pulsar.ConsumerOptions{MaxReconnectToBroker: &giveUpAfter},
		close: func(b *pulsartest.Broker, _ pulsar.Client, _ pulsar.Consumer) {
			b.RefuseSubscribe("watched", "sub", errors.New("not now"))
			b.DropConnections()
		},
		wantCause: "max retry attempts reached",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := brokerAndClient(t)
			client := newTestClient(t, b)
			w := NewCloseWatch()
			opts := tc.opts
			opts.Topic, opts.SubscriptionName, opts.Type = "watched", "sub", pulsar.Shared
			opts.Interceptors = pulsar.ConsumerInterceptors{w}
			c, err := client.Subscribe(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			select {
			case <-w.Done():
				t.Fatal("an open consumer reported closed")
			default:
			}
			tc.close(b, client, c)
			select {
			case <-w.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the closure was not reported")
			}
			err = w.Err()
			if tc.wantCause == "" {
				if err != ErrClosedByCall {
					t.Fatalf("cause %v, want %v", err, ErrClosedByCall)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantCause) {
				t.Fatalf("cause %v, want the client's %q", err, tc.wantCause)
			}
		})
	}
}

// Close waits for the client calls that outlived their stage only until
// its context ends: a call the client never answers does not hold it.
func TestCloseReturnsByItsDeadlineWhileAClientCallHangs(t *testing.T) {
	s := New(Options{})
	hung := make(chan struct{})
	s.bg.Go(func() { <-hung }) // a client call that has not returned
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := s.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want an error wrapping context.DeadlineExceeded", err)
	}
	close(hung)
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("second Close, nothing running: %v", err)
	}
}
