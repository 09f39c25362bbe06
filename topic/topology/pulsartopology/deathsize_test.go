package pulsartopology_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
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

// Guarantee: a letter larger than the broker takes fails its Publish with
// an error that wraps ErrSend and pulsar.ErrMessageTooLarge and says what
// to do, whichever way the client found it out.
func TestALetterOverTheBrokersMessageSizeFailsWithMessageTooLarge(t *testing.T) {
	br, err := pulsartest.Start(context.Background(), pulsartest.Options{Logger: testbroker.PulsarLogger(), MaxMessageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = br.Close() })
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{})))
	q, _ := declared(t, be, build(t, topology.New("oversized").DLQ()))
	err = q.Publish(ctxT(t), topology.Letter[string]{Value: strings.Repeat("x", 4096)})
	if !errors.Is(err, pulsartopology.ErrSend) || !errors.Is(err, pulsar.ErrMessageTooLarge) || !strings.Contains(err.Error(), "raise maxMessageSize") {
		t.Fatalf("publishing a letter over the broker's size = %v, want an error wrapping ErrSend and pulsar.ErrMessageTooLarge that says what to do", err)
	}
	if err := q.Publish(ctxT(t), topology.Letter[string]{Value: "fits"}); err != nil {
		t.Fatalf("publishing after a refused letter = %v, want nil", err)
	}
}
