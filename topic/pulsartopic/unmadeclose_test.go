package pulsartopic_test

import (
	"context"
	"errors"
	"testing"

	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// TestANilOrUnmadeBackendClosesWithNilAndRefusesNewTopics checks that closing a nil
// Backend, or a zero one New did not make, twice, returns nil instead of
// panicking, and that both then refuse a topic with ErrBackendClosed.
func TestANilOrUnmadeBackendClosesWithNilAndRefusesNewTopics(t *testing.T) {
	for name, b := range map[string]*pulsartopic.Backend[string]{"nil": nil, "zero": {}} {
		for i := range 2 {
			if err := b.Close(context.Background()); err != nil {
				t.Errorf("%s backend: Close #%d = %v, want nil", name, i+1, err)
			}
		}
		if _, err := b.NewTopic(context.Background(), "t", topic.Options{}); !errors.Is(err, pulsartopic.ErrBackendClosed) {
			t.Errorf("%s backend: NewTopic = %v, want ErrBackendClosed", name, err)
		}
	}
}

// TestAnUnmadeBackendRefusesNewTopicsAsNotCreatedUntilClosed checks that
// a zero Backend, which has no client, refuses a topic at once with an
// error wrapping topic.ErrNotCreated, whatever time the context leaves,
// rather than a lookup's timeout, and as closed once closed.
func TestAnUnmadeBackendRefusesNewTopicsAsNotCreatedUntilClosed(t *testing.T) {
	b := &pulsartopic.Backend[string]{}
	for _, want := range []error{topic.ErrNotCreated, pulsartopic.ErrBackendClosed} {
		if _, err := b.NewTopic(context.Background(), "t", topic.Options{}); !errors.Is(err, want) {
			t.Errorf("NewTopic = %v, want %v", err, want)
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatalf("Close = %v", err)
		}
	}
}

// TestABackendOnAZeroClientRefusesTopicsWithoutPanicking checks that a
// Backend given a zero *pulsar.Client (declared, not made by NewClient)
// refuses a topic with an error wrapping ErrClientNotCreated, instead of
// panicking on the goroutine that calls the client.
func TestABackendOnAZeroClientRefusesTopicsWithoutPanicking(t *testing.T) {
	b, err := pulsartopic.New(pulsartopic.Options[string]{Client: &spulsar.Client{}, Codec: topic.StringCodec{}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	if _, err := b.NewTopic(context.Background(), "t", topic.Options{}); !errors.Is(err, spulsar.ErrClientNotCreated) {
		t.Errorf("NewTopic = %v, want an error wrapping ErrClientNotCreated", err)
	}
}
