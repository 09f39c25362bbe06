package pulsartopic_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// Guarantee: Close of a backend that made its own client (ServiceURL)
// closes that client's connections: twenty rounds of New, a declared topic
// and Close leave no connection to the broker open.
func TestCloseOfABackendWithItsOwnClientLeavesNoConnectionOpen(t *testing.T) {
	const rounds = 20
	b := testbroker.Pulsar(t)
	addr := b.Addr().String()
	conns := func() int { return testnet.ConnsTo(t, addr) }
	for i := range rounds {
		be, err := pulsartopic.New(testOptions[int](b, topic.IntCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := topic.NewBroker[int]().CreateTopicsContext(ctxT(t), []topic.Declaration[int]{{Name: "orders", Backend: be}}); err != nil {
			t.Fatal(err)
		}
		if n := conns(); n == 0 {
			t.Fatalf("round %d: no connection to the broker after a declaration", i+1)
		}
		if err := be.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		testnet.SettlesAtMost(t, 5*time.Second, fmt.Sprintf("connections to the broker once the backend closed (round %d)", i+1), 0, conns)
	}
}
