package pulsar

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// The permit-wait check tells a closed consumer from an open one by the
// client's answer: an open consumer answers GetLastMessageIDs, a closed one
// is refused with the phrase closedByClient looks for, and other failures
// (a connection lost while the client reconnects) are not taken for a
// closure. This pins the client's wording, which has no error value.
func TestClosedByClient(t *testing.T) {
	ctx := context.Background()
	b, err := pulsartest.Start(ctx, pulsartest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: b.URL(), OperationTimeout: 5 * time.Second,
		Logger: plog.NewLoggerWithSlog(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := b.Publish(ctx, "probe", pulsartest.Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: "probe", SubscriptionName: "sub", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetLastMessageIDs(); err != nil {
		t.Fatalf("open consumer: %v", err)
	}
	c.Close()
	_, err = c.GetLastMessageIDs()
	if err == nil || !closedByClient(err) {
		t.Fatalf("closed consumer: got %v, want the client's refusal", err)
	}
	for _, other := range []error{errors.New("connection closed"), context.DeadlineExceeded, errors.New("server error: ServiceNotReady")} {
		if closedByClient(other) {
			t.Errorf("%v taken for a closed consumer", other)
		}
	}
}
