package topologytest

import (
	"context"
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Backend is what UnmadeBackend checks of a backend's pointer type.
type Backend[T any] interface {
	Declare(ctx context.Context, t *topology.Topology) (topology.Queues[T], error)
	Close(ctx context.Context) error
}

// UnmadeBackend checks that a zero backend its constructor did not make
// (zero) refuses a Declare at once with an error wrapping
// topic.ErrNotCreated, that closing a nil backend, and zero, twice each,
// returns nil instead of panicking (on the caller or on the closing's own
// goroutine), and that both then refuse a Declare with
// topology.ErrClosed.
func UnmadeBackend[T any, B Backend[T]](t *testing.T, zero B) {
	t.Helper()
	top, err := topology.New("t").Build()
	if err != nil {
		t.Fatal(err)
	}
	// A context that never ends: the refusal cannot be a deadline.
	if _, err := zero.Declare(context.Background(), top); !errors.Is(err, topic.ErrNotCreated) {
		t.Errorf("zero backend: Declare = %v, want an error wrapping topic.ErrNotCreated", err)
	}
	var nilB B
	for name, b := range map[string]B{"nil": nilB, "zero": zero} {
		for i := range 2 {
			if err := b.Close(context.Background()); err != nil {
				t.Errorf("%s backend: Close #%d = %v, want nil", name, i+1, err)
			}
		}
	}
	for name, b := range map[string]B{"nil": nilB, "closed zero": zero} {
		if _, err := b.Declare(context.Background(), top); !errors.Is(err, topology.ErrClosed) {
			t.Errorf("%s backend: Declare = %v, want topology.ErrClosed", name, err)
		}
	}
}
