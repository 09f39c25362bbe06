package pulsartopology_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: Close of a backend that made its own client (ServiceURL)
// closes its readers and that client's connections: twenty rounds of New,
// Declare, a subscribed reader and Close leave no connection to the broker
// open.
func TestCloseOfABackendWithItsOwnClientLeavesNoConnectionOpen(t *testing.T) {
	const rounds = 20
	br := testbroker.Pulsar(t)
	addr := br.Addr().String()
	conns := func() int { return testnet.ConnsTo(t, addr) }
	top := build(t, topology.New("conns").ForConsumerGroup("audit").DLQ())
	for i := range rounds {
		be, err := pulsartopology.New(options(br, topic.Codec[string](topic.StringCodec{})))
		if err != nil {
			t.Fatal(err)
		}
		declared(t, be, top)
		if n := conns(); n == 0 {
			t.Fatalf("round %d: no connection to the broker with a subscribed reader", i+1)
		}
		topologytest.MustClose(t, "the backend", be.Close)
		testnet.SettlesAtMost(t, 5*time.Second, fmt.Sprintf("connections to the broker once the backend closed (round %d)", i+1), 0, conns)
	}
}
