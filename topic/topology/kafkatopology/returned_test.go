package kafkatopology

import (
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a letter given back (Queues.Return) stays uncommitted even
// if it is settled afterwards (Settle returns ErrNotCommitted): once its
// reader has closed, the group delivers it again.
func TestALetterGivenBackIsDeliveredAgainThoughSettledAfterwards(t *testing.T) {
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs())
	q := declare(t, b, topology.New("given").Sequenced(topology.Skip).DLQ())
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{Key: "a", N: 1}, Key: "a"}); err != nil {
		t.Fatal(err)
	}
	r, err := q.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	l := receiveOne(t, r)
	if err := q.Return(t.Context(), []topology.Letter[msg]{l}); err != nil {
		t.Fatal(err)
	}
	if err := r.Settle(t.Context(), &l); !errors.Is(err, ErrNotCommitted) {
		t.Errorf("Settle of a letter given back = %v, want ErrNotCommitted", err)
	}
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := receiveOne(t, subscribe(t, q)); got.Value.N != 1 {
		t.Fatalf("after the reader closed the group delivered %+v, want the letter given back, 1, again", got.Value)
	}
}
