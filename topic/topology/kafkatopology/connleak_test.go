package kafkatopology

import (
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a closed reader closes its consumer group's connections and
// the backend's Close closes the rest: ten rounds of Subscribe and Close
// leave the backend no more connections than its own client and producer
// keep, and Close none.
func TestClosedReadersAndBackendLeaveNoConnectionOpen(t *testing.T) {
	const (
		rounds = 10
		// A moment's slack over the backend's own connections: a
		// metadata refresh may open one more.
		slack = 2
	)
	brokers := testbroker.Kafka(t).ListenAddrs()
	conns := func() int { return testnet.ConnsTo(t, brokers...) }
	b := newBackend(t, brokers)
	q := declare(t, b, topology.New("conns"))
	own := conns()
	for i := range rounds {
		r, err := q.Subscribe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		topologytest.MustClose(t, "a reader", r.Close)
		testnet.SettlesAtMost(t, 5*time.Second, fmt.Sprintf("connections to the brokers after %d closed readers (the backend's own: %d)", i+1, own), own+slack, conns)
	}
	topologytest.MustClose(t, "the backend", b.Close)
	testnet.SettlesAtMost(t, 5*time.Second, "connections to the brokers once the backend closed", 0, conns)
}
