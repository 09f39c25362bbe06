package kafkatopology_test

import (
	"context"
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/kafkatopology"
)

// TestANilOrUnmadeBackendClosesWithNilAndANilOneRefusesDeclare checks that closing a nil
// Backend, or a zero one New did not make, twice, returns nil instead of
// panicking (on the caller or on the closing's own goroutine), and that a
// nil one refuses a Declare with topology.ErrClosed.
func TestANilOrUnmadeBackendClosesWithNilAndANilOneRefusesDeclare(t *testing.T) {
	for name, b := range map[string]*kafkatopology.Backend[string]{"nil": nil, "zero": {}} {
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
	var b *kafkatopology.Backend[string]
	if _, err := b.Declare(context.Background(), top); !errors.Is(err, topology.ErrClosed) {
		t.Errorf("nil backend: Declare = %v, want topology.ErrClosed", err)
	}
}
