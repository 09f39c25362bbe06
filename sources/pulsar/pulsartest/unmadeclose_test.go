package pulsartest

import (
	"context"
	"errors"
	"testing"
)

// TestABrokerStartDidNotMakeRefusesCallsAsClosed checks that closing a nil
// Broker (what a failed Start returns), or a zero one Start did not make,
// returns nil instead of panicking, and that the test API of a zero one
// returns ErrClosed, before and after Close.
func TestABrokerStartDidNotMakeRefusesCallsAsClosed(t *testing.T) {
	refused := func(b *Broker) {
		t.Helper()
		if err := b.CreateTopic("t", 0); !errors.Is(err, ErrClosed) {
			t.Errorf("CreateTopic = %v, want ErrClosed", err)
		}
		if _, err := b.Publish(context.Background(), "t", Message{Payload: []byte("x")}); !errors.Is(err, ErrClosed) {
			t.Errorf("Publish = %v, want ErrClosed", err)
		}
	}
	zero := &Broker{}
	refused(zero)
	for name, b := range map[string]*Broker{"nil": nil, "zero": zero} {
		for i := range 2 {
			if err := b.Close(); err != nil {
				t.Errorf("%s broker: Close #%d = %v, want nil", name, i+1, err)
			}
		}
	}
	refused(zero)
}
