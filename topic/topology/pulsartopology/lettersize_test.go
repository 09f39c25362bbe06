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
	"github.com/boulevard-go/boulevard/validate"
)

// letterKey is the key of letterOfSize's letters: the message carries it
// in its metadata, as one byte of tag, one of length and the key.
const letterKey = "key"

// letterOfSize returns a letter that takes size bytes of its message as
// Pulsar counts it when published with no history (its payload and key).
func letterOfSize(size int) topology.Letter[string] {
	return topology.Letter[string]{Key: letterKey, Value: strings.Repeat("x", size-2-len(letterKey))}
}

// Guarantee: Publish refuses, with a *LetterTooLargeError and without
// sending it, a letter whose message fits under the broker's largest
// message but would not once a hold or a dead-lettering adds its
// properties, since such a letter could be neither held nor
// dead-lettered; and a letter of the largest size Publish takes can be
// held with its history at its largest, released, and dead-lettered with
// the longest failure text a source writes, reaching the DLQ with its
// history.
func TestPublishTakesOnlyLettersThatCanStillBeHeldAndDeadLettered(t *testing.T) {
	const limit = 64 << 10
	br, err := pulsartest.Start(context.Background(), pulsartest.Options{Logger: testbroker.PulsarLogger(), MaxMessageSize: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = br.Close() })
	o := options(br, topic.Codec[string](topic.StringCodec{}))
	o.MaxMessageSize = limit
	be := newBackend(t, o)
	top := build(t, topology.New("near-limit").Hold(time.Second).DLQ())
	q, r := declared(t, be, top)
	main := be.TopicName(top.Name())

	// 200 bytes short of the limit: the broker would take it as it is.
	err = q.Publish(ctxT(t), letterOfSize(limit-200))
	var tl *pulsartopology.LetterTooLargeError
	if !errors.As(err, &tl) || tl.Topic != main || tl.Size != limit-200 || tl.Limit != limit || tl.Reserve <= 200 {
		t.Fatalf("Publish of a %d-byte letter = %v, want a *LetterTooLargeError on %q of %d bytes, limit %d, a reserve over 200", limit-200, err, main, limit-200, limit)
	}
	if !errors.Is(err, pulsartopology.ErrLetterTooLarge) || !errors.Is(err, pulsar.ErrMessageTooLarge) {
		t.Fatalf("error %v wraps neither ErrLetterTooLarge nor pulsar.ErrMessageTooLarge", err)
	}
	reserve := tl.Reserve
	err = q.Publish(ctxT(t), letterOfSize(limit-reserve+1))
	if !errors.As(err, &tl) || tl.Size != limit-reserve+1 || tl.Reserve != reserve {
		t.Fatalf("Publish of a %d-byte letter (one byte over limit %d less reserve %d) = %v, want a *LetterTooLargeError", limit-reserve+1, limit, reserve, err)
	}

	largest := letterOfSize(limit - reserve)
	if err := q.Publish(ctxT(t), largest); err != nil {
		t.Fatalf("Publish of a %d-byte letter (limit %d less reserve %d) = %v, want nil", limit-reserve, limit, reserve, err)
	}
	// The refused letters were not sent: the first one delivered is the
	// one taken.
	l := receiveOne(t, r)
	if l.Value != largest.Value || l.Key != letterKey {
		t.Fatalf("received a letter of %d bytes, want the %d-byte one published after the refused ones", len(l.Value), len(largest.Value))
	}
	// The history at its largest: the counts at their bounds, times with
	// nanoseconds and a zone offset.
	now := time.Date(2026, 12, 31, 23, 59, 59, 123456789, time.FixedZone("", 5*3600+1800))
	l.Shard, l.Retries, l.FirstFailure, l.LastFailure, l.Resume = topology.MaxRoutingShards-1, topology.MaxRetriesLimit, now, now, true
	if err := q.Hold(ctxT(t), 0, l); err != nil {
		t.Fatalf("Hold of the largest letter Publish takes = %v, want nil", err)
	}
	if err := r.Settle(ctxT(t), &l); err != nil {
		t.Fatal(err)
	}
	held := receiveOne(t, r)
	if diff := topologytest.LetterDiff(l, held); diff != "" || held.Value != largest.Value {
		t.Fatalf("the letter released from its hold differs from the one held: %s", diff)
	}
	// A failure text the backend cuts, its note counting the most bytes.
	held.Resume = false
	held.Death = &topology.Death{Reason: topology.ReasonMaxRetries, Error: strings.Repeat("é", 1<<20),
		Topic: top.Name(), Group: top.ConsumerGroup(), Retries: topology.MaxRetriesLimit, FirstFailure: now, LastFailure: now}
	if err := q.DeadLetter(ctxT(t), held); err != nil {
		t.Fatalf("DeadLetter of the largest letter Publish takes = %v, want nil", err)
	}
	if err := r.Settle(ctxT(t), &held); err != nil {
		t.Fatal(err)
	}
	dr, err := q.SubscribeDead(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]topology.Letter[string], 2)
	n, err := dr.TryReceive(ctxT(t), buf)
	if err != nil || n != 1 {
		t.Fatalf("TryReceive on the DLQ = %d, %v, want the dead letter", n, err)
	}
	want, death := held, *held.Death
	death.Error = topology.BoundDeathError(death.Error)
	want.Death = &death
	if diff := topologytest.LetterDiff(want, buf[0]); diff != "" || buf[0].Value != largest.Value {
		t.Fatalf("the dead letter differs from the one dead-lettered: %s", diff)
	}
}

// receiveOne receives one letter from r.
func receiveOne(t *testing.T, r topology.Reader[string]) topology.Letter[string] {
	t.Helper()
	buf := make([]topology.Letter[string], 1)
	if n, err := r.Receive(ctxT(t), buf); err != nil || n != 1 {
		t.Fatalf("Receive = %d, %v, want a letter", n, err)
	}
	return buf[0]
}

// Guarantee: MaxMessageSize is bounded by MinMaxMessageSize and
// MaxMessageSizeLimit: accepted at each, refused one past either with an
// error naming pulsartopology.maxMessageSize and the rule; 0 takes
// DefaultMaxMessageSize.
func TestMaxMessageSizeIsBounded(t *testing.T) {
	o := pulsartopology.Options[string]{ServiceURL: "pulsar://x:6650", Codec: topic.StringCodec{}}
	if got := o.WithDefaults().MaxMessageSize; got != 5242880 {
		t.Fatalf("MaxMessageSize 0 defaults to %d, want Pulsar's maxMessageSize, 5242880", got)
	}
	for _, c := range []struct {
		size int
		rule string
	}{
		{pulsartopology.MinMaxMessageSize, ""}, {pulsartopology.MaxMessageSizeLimit, ""},
		{pulsartopology.MinMaxMessageSize - 1, "gte"}, {pulsartopology.MaxMessageSizeLimit + 1, "lte"},
	} {
		o.MaxMessageSize = c.size
		err := o.WithDefaults().Validate()
		var es validate.Errors
		switch {
		case c.rule == "" && err != nil:
			t.Errorf("MaxMessageSize %d refused: %v", c.size, err)
		case c.rule != "" && (!errors.As(err, &es) || !es.Has("pulsartopology.maxMessageSize", c.rule)):
			t.Errorf("MaxMessageSize %d: Validate = %v, want a %s error on pulsartopology.maxMessageSize", c.size, err, c.rule)
		}
	}
}
