package pulsartopic_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a publish whose message, headers included, is larger than
// the broker's maximum message size fails with an error naming the
// topic, wrapping pulsar.ErrMessageTooLarge and saying what to do, and
// the topic goes on publishing: the refused message is not
// handed to another publish while the client still reads it (the race
// detector would report it), and the publishes after it are stored.
func TestAPublishOverTheBrokersMessageSizeFailsAndTheTopicGoesOn(t *testing.T) {
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{Logger: testbroker.PulsarLogger(), MaxMessageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	h := newHandle(t, be, "sized", topic.Options{})
	large := topic.Headers{"note": strings.Repeat("x", 2048)}
	for i := range 3 {
		_, err := h.PublishWithHeaders(ctxT(t), i, large, topic.Block)
		if err == nil || !strings.Contains(err.Error(), be.TopicName("sized")) || !errors.Is(err, pulsar.ErrMessageTooLarge) ||
			!strings.Contains(err.Error(), "raise maxMessageSize") {
			t.Fatalf("publishing a message over the broker's size = %v, want an error naming the topic, wrapping pulsar.ErrMessageTooLarge and saying what to do", err)
		}
		if err := h.Publish(ctxT(t), i); err != nil {
			t.Fatalf("publishing after a refused message = %v, want nil", err)
		}
	}
	if n := len(b.Messages(be.TopicName("sized"))); n != 3 {
		t.Fatalf("the broker stored %d messages, want the 3 that fit", n)
	}
}
