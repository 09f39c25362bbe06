package topology_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wraprun"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
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
