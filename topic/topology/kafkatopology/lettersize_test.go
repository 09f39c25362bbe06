package kafkatopology

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// letterOfSize returns a letter whose record, published with no history,
// is size bytes as the producer counts them (sarama's ByteSize).
func letterOfSize(t *testing.T, size int) topology.Letter[msg] {
	t.Helper()
	empty, err := json.Marshal(msg{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	framing := (&sarama.ProducerMessage{Value: sarama.ByteEncoder(empty)}).ByteSize(2)
	return topology.Letter[msg]{Value: msg{Key: strings.Repeat("x", size-framing), N: 1}}
}

// Guarantee: Publish refuses, with a *LetterTooLargeError and without
// producing it, a letter whose record fits under the producer's largest
// message (Producer.MaxMessageBytes) but would not once a hold or a
// dead-lettering adds its headers, since such a letter could be neither
// held nor dead-lettered; and a letter of the largest size Publish takes
// can be held with its history at its largest and dead-lettered with the
// longest failure text a source writes.
func TestPublishTakesOnlyLettersThatCanStillBeHeldAndDeadLettered(t *testing.T) {
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs())
	q := declare(t, b, topology.New("near-limit").Hold(time.Hour).DLQ())
	r := subscribe(t, q)
	limit := b.cfg.Producer.MaxMessageBytes
	reserve := q.(*queues[msg]).reserve

	// 200 bytes short of the limit: the broker would take it as it is.
	err := q.Publish(t.Context(), letterOfSize(t, limit-200))
	var tl *LetterTooLargeError
	if !errors.As(err, &tl) || tl.Topic != "near-limit" || tl.Size != limit-200 || tl.Limit != limit || tl.Reserve != reserve {
		t.Fatalf("Publish of a %d-byte letter = %v, want a *LetterTooLargeError on %q of %d bytes, limit %d, reserve %d", limit-200, err, "near-limit", limit-200, limit, reserve)
	}
	if !errors.Is(err, ErrLetterTooLarge) || !errors.Is(err, sarama.ErrMessageSizeTooLarge) {
		t.Fatalf("error %v wraps neither ErrLetterTooLarge nor sarama.ErrMessageSizeTooLarge", err)
	}

	largest := letterOfSize(t, limit-reserve)
	if err := q.Publish(t.Context(), largest); err != nil {
		t.Fatalf("Publish of a %d-byte letter (limit %d less reserve %d) = %v, want nil", limit-reserve, limit, reserve, err)
	}
	// The refused letter was not produced: the first one delivered is
	// the one taken.
	l := receiveOne(t, r)
	if l.Value != largest.Value {
		t.Fatalf("received a letter of %d bytes, want the %d-byte one published after the refused one", len(l.Value.Key), len(largest.Value.Key))
	}
	now := time.Now()
	l.Retries, l.FirstFailure, l.LastFailure, l.Resume = topology.MaxRetriesLimit, now, now, true
	if err := q.Hold(t.Context(), 0, l); err != nil {
		t.Fatalf("Hold of the largest letter Publish takes = %v, want nil", err)
	}
	l.Resume = false
	l.Death = &topology.Death{Reason: topology.ReasonMaxRetries, Error: topology.BoundDeathError(strings.Repeat("é", 1<<20)),
		Topic: "near-limit", Group: "near-limit", Retries: topology.MaxRetriesLimit, FirstFailure: now, LastFailure: now}
	if err := q.DeadLetter(t.Context(), l); err != nil {
		t.Fatalf("DeadLetter of the largest letter Publish takes = %v, want nil", err)
	}
	if err := r.Settle(t.Context(), &l); err != nil {
		t.Fatal(err)
	}
}
