package topology_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wraprun"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: a Memory NewMemory did not make and a Publisher NewPublisher
// did not make (zero values, declared with var) hold nothing: the
// Memory's Close returns nil and leaves it usable (no lock left held), its
// Declare returns an error wrapping topic.ErrNotCreated, and the
// Publisher's Publish returns one too, nothing published, instead of
// panicking or hanging.
func TestZeroMemoryAndPublisherRefuseWithErrNotCreated(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tp, err := topology.New("orders").Build()
	if err != nil {
		t.Fatal(err)
	}
	var m topology.Memory[int]
	var p topology.Publisher[int]
	calls := []struct {
		name string
		call func() error
		want error
	}{
		{"Memory.Close", func() error { return m.Close(ctx) }, nil},
		{"Memory.Close again", func() error { return m.Close(ctx) }, nil},
		{"Memory.Declare", func() error { _, err := m.Declare(ctx, tp); return err }, topic.ErrNotCreated},
		{"Publisher.Publish", func() error { return p.Publish(ctx, 1) }, topic.ErrNotCreated},
	}
	for _, c := range calls {
		done := make(chan error, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- errors.New("panicked")
				}
			}()
			done <- c.call()
		}()
		select {
		case err := <-done:
			if !errors.Is(err, c.want) {
				t.Errorf("%s on a zero value: %v, want %v", c.name, err, c.want)
			}
		case <-ctx.Done():
			t.Fatalf("%s on a zero value did not return", c.name)
		}
	}
}

// Guarantee: a Source neither NewSource nor NewDeadSource made (a zero
// value) holds nothing: its Close returns nil, and its Run, handed a
// pipeline's stage (a source wrapping it), returns an error wrapping
// topic.ErrNotCreated at once, instead of panicking.
func TestAZeroSourceClosesAndRefusesToRunWithErrNotCreated(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var zero topology.Source[int]
	if err := zero.Close(ctx); err != nil {
		t.Errorf("Close of a zero Source: %v, want nil", err)
	}
	if err := wraprun.Run(t, zero.Run); !errors.Is(err, topic.ErrNotCreated) {
		t.Errorf("Run of a zero Source: %v, want an error wrapping topic.ErrNotCreated", err)
	}
}

// noTopology is a Queues whose Topology is nil, as a backend written by
// a user may return.
type noTopology[T any] struct{ topology.Queues[T] }

func (noTopology[T]) Topology() *topology.Topology { return nil }

// Guarantee: queues without a topology (their Topology returns nil) are
// refused with a validate.FieldError naming them by NewSource,
// NewDeadSource, NewPublisher and Replay, instead of a panic.
func TestQueuesWithoutATopologyAreRefused(t *testing.T) {
	q := noTopology[int]{}
	calls := []struct {
		name, field string
		call        func() error
	}{
		{"NewSource", "topology.queues", func() error {
			_, err := topology.NewSource(topology.SourceOptions[int]{Queues: q})
			return err
		}},
		{"NewDeadSource", "topology.queues", func() error {
			_, err := topology.NewDeadSource(topology.SourceOptions[int]{Queues: q})
			return err
		}},
		{"NewPublisher", "publisher.queues", func() error {
			_, err := topology.NewPublisher[int](q, topology.PublisherOptions[int]{})
			return err
		}},
		{"Replay", "replay.queues", func() error {
			_, err := topology.Replay(t.Context(), q, topology.ReplayOptions[int]{})
			return err
		}},
	}
	for _, c := range calls {
		err := func() (err error) {
			defer message.Recover(&err)
			return c.call()
		}()
		var fe *validate.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || fe.Rule != "topology" {
			t.Errorf("%s with queues without a topology = %v, want a validate.FieldError for %s", c.name, err, c.field)
		}
	}
}

// Guarantee: DeliveryOf a nil message reports no Delivery instead of
// panicking.
func TestDeliveryOfANilMessageIsNone(t *testing.T) {
	err := func() (err error) {
		defer message.Recover(&err)
		if d, ok := topology.DeliveryOf[int](nil); ok || d != nil {
			t.Errorf("DeliveryOf(nil) = %v, %t; want nil, false", d, ok)
		}
		return nil
	}()
	if err != nil {
		t.Errorf("DeliveryOf(nil): %v", err)
	}
}
