package franz

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Guarantee: the poll loop waits for a claim's reader to take in and decide
// on every hand-over before it polls again: records handed over after the
// reader took its inbox keep it waiting, a reader waiting out a redelivery
// backoff or gone does not.
func TestPollWaitsForTheReadersDecision(t *testing.T) {
	p := &partition{rewindAt: -1, wake: make(chan struct{}, 1), done: make(chan struct{})}
	m := &member{parts: map[topicPartition]*partition{{"t", 0}: p}}
	recs := func(from int64) []*kgo.Record { return []*kgo.Record{{Offset: from}, {Offset: from + 1}} }

	if m.undecided() {
		t.Fatal("a claim that was handed nothing holds the poll loop back")
	}
	p.push(recs(0), 2)
	if !m.undecided() {
		t.Fatal("records handed over and not yet taken in do not hold the poll loop back")
	}
	in, seq := p.takeInbox()
	if len(in) != 2 {
		t.Fatalf("took %d records, want 2", len(in))
	}
	if !m.undecided() {
		t.Fatal("records taken in but not yet decided on do not hold the poll loop back")
	}
	p.push(recs(2), 4) // arrives while the reader decides on the first two
	p.decided.Store(seq)
	if !m.undecided() {
		t.Fatal("records handed over after the reader took its inbox do not hold the poll loop back")
	}
	_, seq = p.takeInbox()
	p.decided.Store(seq)
	if m.undecided() {
		t.Fatal("a reader that decided on everything still holds the poll loop back")
	}

	p.push(recs(4), 6)
	p.decided.Store(noGate) // waiting out a redelivery backoff
	if m.undecided() {
		t.Fatal("a reader waiting out a redelivery backoff holds the poll loop back")
	}
	p.decided.Store(seq)
	close(p.done)
	if m.undecided() {
		t.Fatal("a reader that has returned holds the poll loop back")
	}
}
