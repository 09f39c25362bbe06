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

// TestABrokerStartDidNotMakeAnswersTheCallsWithoutAnError checks that the
// calls of the test API returning no error answer on a zero Broker, before
// and after Close, instead of panicking: it has no address, stalls and
// withholds nothing (release is idempotent) and is empty.
func TestABrokerStartDidNotMakeAnswersTheCallsWithoutAnError(t *testing.T) {
	b := &Broker{}
	for i := range 2 {
		if a := b.Addr(); a != nil {
			t.Errorf("Addr = %v, want nil", a)
		}
		if u := b.URL(); u != "" {
			t.Errorf("URL = %q, want empty", u)
		}
		b.StallDispatch("t", true)
		b.StallDispatch("t", false)
		release := b.Withhold(CommandSubscribe, CommandAck)
		release()
		release()
		b.DropConnections()
		b.RefuseSubscribe("t", "s", errors.New("refused"))
		if n := b.Backlog("t", "s"); n > 0 {
			t.Errorf("Backlog = %d, want none", n)
		}
		if st := b.Stats(); st != (BrokerStats{}) {
			t.Errorf("Stats = %+v, want zero", st)
		}
		if got := len(b.Messages("t")) + len(b.Subscriptions("t")) + len(b.Consumers("t", "s")); got != 0 {
			t.Errorf("Messages, Subscriptions and Consumers hold %d entries, want none", got)
		}
		if i == 0 {
			if err := b.Close(); err != nil {
				t.Fatalf("Close = %v", err)
			}
		}
	}
}
