package config_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
)

// Guarantee: a connector that panics fails BuildContext with an error
// wrapping a *message.PanicError, naming the connection, instead of
// panicking in the caller, and the backend already made for another
// connection is closed.
func TestAPanickingConnectorIsTheConnectionsError(t *testing.T) {
	plan, err := config.Resolve(mustParse(t, connectedDoc), config.Wiring{})
	if err != nil {
		t.Fatal(err)
	}
	var closed atomic.Int32
	connect := func(_ context.Context, c config.ConnectionSpec) (topic.Backend[int], error) {
		if c.Kind == "pulsar" {
			panic("connector bug")
		}
		return fakeBackend{name: c.Kind, closed: &closed}, nil
	}
	broker := topic.NewBroker[int]()
	defer broker.Close()
	var w *config.Wired[int]
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("BuildContext panicked: %v", r)
			}
		}()
		w, err = config.BuildContext(t.Context(), broker, plan, config.BuildOptions[int]{Connect: connect})
	}()
	if pe := (*message.PanicError)(nil); w != nil || !errors.As(err, &pe) {
		t.Fatalf("BuildContext = %v, %v; want nil and an error wrapping a *message.PanicError", w, err)
	}
	if n := closed.Load(); n != 1 {
		t.Errorf("closed %d backends after the panic, want the kafka one", n)
	}
}
