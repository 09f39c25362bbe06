package pulsartopology_test

import (
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a letter whose failure text is longer than a message can
// carry (over the broker's 5 MiB maximum message size) is dead-lettered
// all the same, its error cut to topology.MaxDeathErrorBytes at a character
// boundary and ending with how many bytes were cut; its message is
// acknowledged, not delivered to the group again.
func TestADeadLetterWithAnErrorLongerThanAMessageReachesTheDLQ(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{})))
	top := build(t, topology.New("long-error").Hold(time.Second).DLQ())
	q, r := declared(t, be, top)
	if err := q.Publish(ctxT(t), topology.Letter[string]{Value: "v"}); err != nil {
		t.Fatal(err)
	}
	buf := make([]topology.Letter[string], 1)
	if _, err := r.Receive(ctxT(t), buf); err != nil {
		t.Fatal(err)
	}
	// "é" is two bytes: the cut must not split one.
	text := "x" + strings.Repeat("é", 3<<20)
	l := buf[0]
	l.Death = &topology.Death{Reason: topology.ReasonMaxRetries, Error: text, Topic: top.Name(), Group: top.ConsumerGroup()}
	if err := q.DeadLetter(ctxT(t), l); err != nil {
		t.Fatalf("DeadLetter with a %d-byte error = %v, want nil", len(text), err)
	}
	if err := r.Settle(ctxT(t), &l); err != nil {
		t.Fatalf("Settle after the dead-lettering = %v, want nil", err)
	}
	dr, err := q.SubscribeDead(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	n, err := dr.TryReceive(ctxT(t), buf)
	if err != nil || n != 1 {
		t.Fatalf("TryReceive on the DLQ = %d, %v, want the dead letter", n, err)
	}
	got := buf[0].Death
	topologytest.ExpectBoundedDeathError(t, text, got.Error)
	if got.Reason != topology.ReasonMaxRetries || buf[0].Value != "v" {
		t.Fatalf("the dead letter is %+v with death %+v, want value v dead of max_retries", buf[0], got)
	}
}
