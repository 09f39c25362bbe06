package topologytest

import (
	"context"
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// Backend is what UnmadeBackend checks of a backend's pointer type.
type Backend[T any] interface {
	Declare(ctx context.Context, t *topology.Topology) (topology.Queues[T], error)
	Close(ctx context.Context) error
}

// UnmadeBackend checks that closing a nil backend, and a zero one its
// constructor did not make (zero), twice each, returns nil instead of
// panicking (on the caller or on the closing's own goroutine), and that
// the nil one refuses a Declare with topology.ErrClosed.
func UnmadeBackend[T any, B Backend[T]](t *testing.T, zero B) {
	t.Helper()
	var nilB B
	for name, b := range map[string]B{"nil": nilB, "zero": zero} {
		for i := range 2 {
			if err := b.Close(context.Background()); err != nil {
				t.Errorf("%s backend: Close #%d = %v, want nil", name, i+1, err)
			}
		}
	}
	top, err := topology.New("t").Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nilB.Declare(context.Background(), top); !errors.Is(err, topology.ErrClosed) {
		t.Errorf("nil backend: Declare = %v, want topology.ErrClosed", err)
	}
}
