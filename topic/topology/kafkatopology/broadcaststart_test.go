package kafkatopology

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a broadcast reader starts at the log end as of its
// Subscribe: what was published before it is not delivered to it.
func TestABroadcastReaderStartsAtTheLogEndAsOfSubscribe(t *testing.T) {
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs(), func(o *Options[msg]) { o.Partitions = 2 })
	q := declare(t, b, topology.New("news").Broadcast())
	for n := range 4 {
		if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	r := subscribe(t, q)
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 10}}); err != nil {
		t.Fatal(err)
	}
	if got := receiveOne(t, r); got.Value.N != 10 {
		t.Errorf("a broadcast reader subscribed after letters 0 to 3 received %d first, want 10, published after it", got.Value.N)
	}
}
