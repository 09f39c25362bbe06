package pulsartopology_test

import (
	"context"
	"errors"
	"testing"

	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// Guarantee: a Backend given a zero *pulsar.Client (declared, not made by
// NewClient) refuses a declaration with an error wrapping
// ErrClientNotCreated, instead of panicking on the goroutine that calls
// the client.
func TestABackendOnAZeroClientRefusesDeclareWithoutPanicking(t *testing.T) {
	b, err := pulsartopology.New(pulsartopology.Options[string]{Client: &spulsar.Client{}, Codec: topic.StringCodec{}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	top, err := topology.New("t").DLQ().Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Declare(context.Background(), top); !errors.Is(err, spulsar.ErrClientNotCreated) {
		t.Errorf("Declare = %v, want an error wrapping ErrClientNotCreated", err)
	}
}
