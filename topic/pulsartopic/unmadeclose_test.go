package pulsartopic_test

import (
	"context"
	"testing"

	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// TestCloseOfANilOrUnmadeBackendReturnsNil checks that closing a nil
// Backend, or a zero one New did not make, twice, returns nil instead of
// panicking (on the caller or on the closing's own goroutine).
func TestCloseOfANilOrUnmadeBackendReturnsNil(t *testing.T) {
	for name, b := range map[string]*pulsartopic.Backend[string]{"nil": nil, "zero": {}} {
		for i := range 2 {
			if err := b.Close(context.Background()); err != nil {
				t.Errorf("%s backend: Close #%d = %v, want nil", name, i+1, err)
			}
		}
	}
}
