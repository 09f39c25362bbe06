package kafkatopology

import (
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a letter whose failure text is longer than a record can
// carry (over sarama's default 1 MB largest message) is dead-lettered all
// the same, its error cut to topology.MaxDeathErrorBytes at a character
// boundary and ending with how many bytes were cut; its record is settled,
// not delivered to the group again.
func TestADeadLetterWithAnErrorLongerThanARecordReachesTheDLQ(t *testing.T) {
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs())
	q := declare(t, b, topology.New("long-error").DLQ())
	r := subscribe(t, q)
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{Key: "k", N: 1}}); err != nil {
		t.Fatal(err)
	}
	l := receiveOne(t, r)
	// "é" is two bytes: the cut must not split one.
	text := "x" + strings.Repeat("é", 1<<20)
	l.Death = &topology.Death{Reason: topology.ReasonRejected, Error: text, Topic: "long-error", Group: "long-error"}
	if err := q.DeadLetter(t.Context(), l); err != nil {
		t.Fatalf("DeadLetter with a %d-byte error = %v, want nil", len(text), err)
	}
	if err := r.Settle(t.Context(), &l); err != nil {
		t.Fatalf("Settle after the dead-lettering = %v, want nil", err)
	}
	dr, err := q.SubscribeDead(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "the dead reader", dr.Close) })
	got := receiveOne(t, dr)
	topologytest.ExpectBoundedDeathError(t, text, got.Death.Error)
	if got.Death.Reason != topology.ReasonRejected || got.Value != (msg{Key: "k", N: 1}) {
		t.Fatalf("the dead letter is %+v with death %+v, want %+v dead of rejected", got.Value, got.Death, msg{Key: "k", N: 1})
	}
}
