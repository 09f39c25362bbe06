package topology

import (
	"slices"
	"testing"
	"time"
)

// Guarantee: a sequenced source knows its key's message out by the whole
// history it sent it out with (retry count, first and last failure, the
// times as instants, whatever their location): a letter of the key
// marked Resume that differs in any of them, or that comes while the
// key's message is back in flight (a second copy of it), waits for the
// key's turn; only the message itself takes the turn, and the letters
// that waited go one at a time, in order, as the turns end.
func TestSequencerKnowsTheKeysMessageOutByItsWholeHistory(t *testing.T) {
	q := newTestSequencer(0, 100)
	first := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	last := first.Add(time.Minute)
	out := Letter[int]{Key: "A", Value: 1, Retries: 2, FirstFailure: first, LastFailure: last, Resume: true}
	if q.admit(Letter[int]{Key: "A", Value: 1}, nil) != admitDeliver {
		t.Fatal("the first letter of a key was not admitted")
	}
	q.sentOut(&out)
	copies := []struct {
		name string
		l    Letter[int]
	}{
		{"another retry count", Letter[int]{Retries: 1, FirstFailure: first, LastFailure: last}},
		{"another first failure", Letter[int]{Retries: 2, FirstFailure: first.Add(time.Nanosecond), LastFailure: last}},
		{"another last failure", Letter[int]{Retries: 2, FirstFailure: first, LastFailure: last.Add(-time.Nanosecond)}},
		{"no history", Letter[int]{}},
	}
	for i, c := range copies {
		c.l.Key, c.l.Value, c.l.Resume = "A", 10+i, true
		if got := q.admit(c.l, nil); got != admitHeldBack {
			t.Errorf("a copy with %s, while the key's message is out: admission %d, want held back", c.name, got)
		}
	}
	// The message itself, its times decoded in another location.
	back := out
	zone := time.FixedZone("UTC+1", 3600)
	back.FirstFailure, back.LastFailure = first.In(zone), last.In(zone)
	if got := q.admit(back, nil); got != admitDeliver {
		t.Fatalf("the key's message back with its history: admission %d, want delivered", got)
	}
	if got := q.admit(out, nil); got != admitHeldBack {
		t.Errorf("a second copy of the key's message, back in flight: admission %d, want held back", got)
	}
	if got, want := q.heldBack(), len(copies)+1; got != want {
		t.Errorf("%d letters held back, want %d", got, want)
	}
	var got []int
	for turn := range len(copies) + 1 {
		q.release("A")
		ready := q.takeReady(nil, 8)
		if len(ready) != 1 {
			t.Fatalf("turn %d: %d letters ready, want one", turn, len(ready))
		}
		got = append(got, ready[0].l.Value)
	}
	if want := []int{10, 11, 12, 13, 1}; !slices.Equal(got, want) {
		t.Errorf("the letters held back went %v, want %v", got, want)
	}
}

// Guarantee: a set of routing shards holds exactly the shards below its
// count it was made of, across the 64-shard words, answers no for any
// shard out of range (negative, or past the count), and a union holds
// the shards of either set, whichever is longer.
func TestAShardSetHoldsExactlyItsShards(t *testing.T) {
	in := []int{0, 63, 64, 127, 128}
	s := shardSetOf(129, func(shard int) bool { return slices.Contains(in, shard) })
	for shard := -65; shard < 300; shard++ {
		if got, want := s.has(shard), slices.Contains(in, shard); got != want {
			t.Errorf("has(%d) = %v, want %v", shard, got, want)
		}
	}
	if s := shardSetOf(129, func(int) bool { return false }); s.has(0) || s != nil {
		t.Errorf("the set of no shard is %v, want nil", s)
	}
	short := shardSetOf(64, func(shard int) bool { return shard == 1 })
	for _, u := range []shardSet{slices.Clone(short).union(s), slices.Clone(s).union(short)} {
		for shard := range 129 {
			if got, want := u.has(shard), shard == 1 || slices.Contains(in, shard); got != want {
				t.Errorf("union has(%d) = %v, want %v", shard, got, want)
			}
		}
	}
}

// partsReader tells which receipts came from a part let go of: a
// receipt is the part's name, and gone holds those let go of.
type partsReader struct{ gone map[any]bool }

func (p *partsReader) LetGo(receipt any) bool { return p.gone[receipt] }

// Guarantee: a sequenced source whose reader knows each letter's part
// (a PartTracker) gives back, as the reader lets a part go, exactly the
// letters held back that the part handed out, whatever their shard, and
// those of it it admits afterwards; the letters of a part the reader
// keeps stay held back behind their key's message out, and go in their
// order once an assignment that leaves their shard out tells that the
// message comes back elsewhere.
func TestASequencerGivesBackTheLettersOfThePartLetGoAndKeepsTheOthers(t *testing.T) {
	q := newTestSequencer(2, 100)
	parts := &partsReader{gone: map[any]bool{}}
	r := &heldReader[int]{parts: parts}
	// Key A, of shard 1: its message 1 is out; 2 and 4 come from the
	// part "old", 3 from "new".
	first := Letter[int]{Key: "A", Shard: 1, Value: 1, Receipt: "old"}
	if q.admit(first, r) != admitDeliver {
		t.Fatal("the key's first letter was not delivered")
	}
	q.sentOut(&first)
	for _, l := range []Letter[int]{{Value: 2, Receipt: "old"}, {Value: 3, Receipt: "new"}, {Value: 4, Receipt: "old"}} {
		l.Key, l.Shard = "A", 1
		if got := q.admit(l, r); got != admitHeldBack {
			t.Fatalf("letter %d: admission %d, want held back", l.Value, got)
		}
	}
	// The reader lets the part "new" go, which the shard routes to now.
	parts.gone["new"] = true
	values := func(ps []pendingLetter[int]) []int {
		var vs []int
		for _, p := range ps {
			vs = append(vs, p.l.Value)
		}
		return vs
	}
	if got := values(q.letGo(r, func(shard int) bool { return shard == 1 })); !slices.Equal(got, []int{3}) {
		t.Errorf("letting the part go gave back %v, want [3]", got)
	}
	if got := q.admit(Letter[int]{Key: "A", Shard: 1, Value: 5, Receipt: "new"}, r); got != admitGiveBack {
		t.Errorf("a letter of the part let go, admitted after: admission %d, want given back", got)
	}
	if got := q.heldBack(); got != 2 {
		t.Errorf("%d letters held back, want 2 (of the part kept)", got)
	}
	// The assignment left, without shard 1: the message out comes back
	// to another reader, and the letters of the part kept go in order.
	if got := values(q.assigned(r, func(shard int) bool { return shard == 0 })); len(got) > 0 {
		t.Errorf("the assignment left gave back %v, want none", got)
	}
	var turns []int
	for range 2 {
		ready := q.takeReady(nil, 8)
		if len(ready) != 1 {
			t.Fatalf("%d letters ready, want one", len(ready))
		}
		turns = append(turns, ready[0].l.Value)
		q.release("A")
	}
	if !slices.Equal(turns, []int{2, 4}) || q.heldBack() != 0 {
		t.Errorf("the letters of the part kept went %v, %d left, want [2 4], none left", turns, q.heldBack())
	}
}

// newTestSequencer returns a sequencer of shards routing shards that
// holds back at most limit letters.
func newTestSequencer(shards, limit int) *sequencer[int] {
	return &sequencer[int]{shards: shards, limit: limit, keys: map[string]*keyState[int]{}, wakers: map[*waker]struct{}{}}
}

// Guarantee: once a reader that knows each letter's part lets a part go,
// a sequenced source decides by the letter's part alone whether to give
// back a letter it admits: one of a part the reader keeps waits behind
// its key's message out even when the part let go held letters of the
// same shard, and one of the part let go is given back even when the
// run began taking letters after the reader told.
func TestALetterOfAPartKeptWaitsItsTurnWhenAPartOfItsShardIsLetGo(t *testing.T) {
	q := newTestSequencer(2, 100)
	parts := &partsReader{gone: map[any]bool{}}
	r := &heldReader[int]{parts: parts}
	first := Letter[int]{Key: "A", Shard: 1, Value: 1, Receipt: "kept"}
	if q.admit(first, r) != admitDeliver {
		t.Fatal("the key's first letter was not delivered")
	}
	q.sentOut(&first)
	parts.gone["let go"] = true
	if got := q.letGo(r, func(shard int) bool { return shard == 1 }); len(got) > 0 {
		t.Fatalf("letting the part go gave back %d letters, want none", len(got))
	}
	if got := q.admit(Letter[int]{Key: "A", Shard: 1, Value: 2, Receipt: "kept"}, r); got != admitHeldBack {
		t.Errorf("a letter of the part kept, taken as the reader let the other go: admission %d, want held back", got)
	}
	q.taking(r)
	if got := q.admit(Letter[int]{Key: "A", Shard: 1, Value: 3, Receipt: "let go"}, r); got != admitGiveBack {
		t.Errorf("a letter of the part let go, taken after the reader told: admission %d, want given back", got)
	}
	q.release("A")
	if ready := q.takeReady(nil, 8); len(ready) != 1 || ready[0].l.Value != 2 || q.heldBack() != 0 {
		t.Errorf("once the key's message was done: %d ready, %d held back, want letter 2 ready alone", len(ready), q.heldBack())
	}
}

// Guarantee: a sequenced source at MaxHeldBack whose letters held back
// all wait on their keys' messages out takes letters past the bound
// after a part let go had its letters given back, emptying a key whose
// message is in flight: that key no longer counts as one that makes
// room, so the run does not wait for ever for messages that come back
// only through its reader.
func TestASourceAtMaxHeldBackTakesPastItAfterAPartsLettersWereGivenBack(t *testing.T) {
	q := newTestSequencer(2, 1)
	parts := &partsReader{gone: map[any]bool{}}
	r := &heldReader[int]{parts: parts}
	// Key A's message 1 is in flight; its letter 2, of the part let go,
	// waits behind it and is given back.
	q.admit(Letter[int]{Key: "A", Shard: 0, Value: 1, Receipt: "kept"}, r)
	q.admit(Letter[int]{Key: "A", Shard: 0, Value: 2, Receipt: "let go"}, r)
	parts.gone["let go"] = true
	if got := q.letGo(r, func(shard int) bool { return shard == 0 }); len(got) != 1 {
		t.Fatalf("letting the part go gave back %d letters, want 1", len(got))
	}
	// Key B's message 11 is out; its letter 12 waits for it, at the
	// bound.
	b := Letter[int]{Key: "B", Shard: 1, Value: 11, Receipt: "kept"}
	q.admit(b, r)
	q.sentOut(&b)
	q.admit(Letter[int]{Key: "B", Shard: 1, Value: 12, Receipt: "kept"}, r)
	if n, _ := q.room(8); n != 1 {
		t.Errorf("at MaxHeldBack with every letter held back waiting on a message out: room %d, want 1", n)
	}
}

// Guarantee: once an assignment leaving a key's shard out ends the wait
// for the key's message out and the key's next letter, of a part the
// reader keeps, takes its turn, that message coming back (the shard
// assigned back) waits its turn: the key keeps one message in flight.
func TestAMessageOutComingBackAfterItsKeyMovedOnWaitsItsTurn(t *testing.T) {
	q := newTestSequencer(2, 100)
	r := &heldReader[int]{parts: &partsReader{}}
	out := Letter[int]{Key: "A", Shard: 1, Value: 1, Retries: 1, Receipt: "kept"}
	if q.admit(out, r) != admitDeliver {
		t.Fatal("the key's first letter was not delivered")
	}
	q.sentOut(&out)
	for v := 2; v <= 3; v++ {
		if got := q.admit(Letter[int]{Key: "A", Shard: 1, Value: v, Receipt: "kept"}, r); got != admitHeldBack {
			t.Fatalf("letter %d: admission %d, want held back", v, got)
		}
	}
	q.assigned(r, func(shard int) bool { return shard == 0 })
	if ready := q.takeReady(nil, 8); len(ready) != 1 || ready[0].l.Value != 2 {
		t.Fatalf("%d letters ready once the assignment left the shard out, want letter 2", len(ready))
	}
	q.assigned(r, func(int) bool { return true })
	back := out
	back.Resume = true
	if got := q.admit(back, r); got != admitHeldBack {
		t.Errorf("the message out, back while letter 2 is in flight: admission %d, want held back", got)
	}
}

// Guarantee: the letters of a poisoned key that wait to be dead-lettered
// stay for the dead-letter queue, in order, whatever the reader tells of
// their shard: a part let go gives none of them back, and an assignment
// leaving their shard out neither gives them back nor ends the key's
// draining. Once the draining ends, the key's poisoning is forgotten if
// the shard is still out (its later letters are its new owner's), and
// kept if an assignment gave the shard back meanwhile.
func TestAPoisonedKeysLettersStayForTheDeadLetterQueueAsItsShardMoves(t *testing.T) {
	for _, back := range []bool{false, true} {
		q, r := newDrainingSequencer(t)
		if got := q.letGo(r, func(shard int) bool { return shard == 1 }); len(got) > 0 {
			t.Errorf("letting the shard go gave back %d letters of the key being drained, want none", len(got))
		}
		if got := q.assigned(r, func(shard int) bool { return shard == 0 }); len(got) > 0 {
			t.Errorf("an assignment leaving the shard out gave back %d letters of the key being drained, want none", len(got))
		}
		if back {
			q.assigned(r, func(int) bool { return true })
		}
		if got := q.drained("A"); len(got) != 1 || got[0].l.Value != 3 {
			t.Errorf("draining took %d letters, want letter 3", len(got))
		}
		if got := q.drained("A"); len(got) > 0 {
			t.Errorf("draining again took %d letters, want none", len(got))
		}
		want, wantKeys := admitDeliver, 0
		if back {
			want, wantKeys = admitPoisoned, 1
		}
		if got := q.poisonedKeys(); got != wantKeys {
			t.Errorf("shard given back %v: %d poisoned keys once drained, want %d", back, got, wantKeys)
		}
		if got := q.admit(Letter[int]{Key: "A", Shard: 1, Value: 4}, nil); got != want {
			t.Errorf("shard given back %v: a later letter of the key: admission %d, want %d", back, got, want)
		}
	}
}

// Guarantee: an assignment that leaves a poisoned key's shard out
// forgets the key's poisoning, and PoisonedKeys no longer counts it: a
// later letter of the key is admitted as any other, and so is a key
// admitted afterwards (what the sequencer kept of the key goes to it). A poisoned key whose shard is in
// the assignment stays poisoned.
func TestAPoisoningIsForgottenWhenAnAssignmentLeavesItsShardOut(t *testing.T) {
	q := newTestSequencer(2, 100)
	r := &heldReader[int]{}
	for shard, key := range []string{"B", "A"} {
		q.admit(Letter[int]{Key: key, Shard: shard, Value: 1}, r)
		q.poison(key, shard, "failed")
		q.drained(key)
	}
	q.poison("D", 1, "failed") // with no letter of it in flight
	q.drained("D")
	q.assigned(r, func(shard int) bool { return shard == 0 })
	if got := q.poisonedKeys(); got != 1 {
		t.Fatalf("an assignment left out the shard of poisoned keys A and D, not B's: %d poisoned keys, want 1", got)
	}
	if got := q.admit(Letter[int]{Key: "B", Value: 2}, r); got != admitPoisoned {
		t.Errorf("a later letter of key B, whose shard is assigned: admission %d, want dead-lettered", got)
	}
	for _, key := range []string{"C", "A", "D"} {
		for v, want := range []admission{admitDeliver, admitHeldBack} {
			if got := q.admit(Letter[int]{Key: key, Shard: 1, Value: 2 + v}, nil); got != want {
				t.Errorf("letter %d of key %s, not poisoned here: admission %d, want %d", 2+v, key, got, want)
			}
		}
	}
	if got := q.poisonedKeys(); got != 1 {
		t.Errorf("once keys C, A and D have letters in flight: %d poisoned keys, want 1", got)
	}
}

// newDrainingSequencer returns a sequencer whose key A, of shard 1, is
// poisoned by its letter 1 and being drained, with its letter 3, taken
// from the reader it returns after letter 2 was dead-lettered, waiting
// to be dead-lettered.
func newDrainingSequencer(t *testing.T) (*sequencer[int], *heldReader[int]) {
	t.Helper()
	q := newTestSequencer(2, 100)
	r := &heldReader[int]{}
	q.admit(Letter[int]{Key: "A", Shard: 1, Value: 1}, r)
	q.admit(Letter[int]{Key: "A", Shard: 1, Value: 2}, r)
	if got := q.poison("A", 1, "failed"); len(got) != 1 || got[0].l.Value != 2 {
		t.Fatalf("poisoning took %d letters, want letter 2", len(got))
	}
	if got := q.admit(Letter[int]{Key: "A", Shard: 1, Value: 3}, r); got != admitHeldBack {
		t.Fatalf("a letter of the key being drained: admission %d, want held back", got)
	}
	return q, r
}

// Guarantee: Stats.HeldBack counts a letter of a key whose turn came
// until the run delivers it, as it counted it while it waited: a letter
// released to take its turn is still held back by the source.
func TestHeldBackCountsALetterReadyUntilItIsDelivered(t *testing.T) {
	q := newTestSequencer(1, 100)
	q.admit(Letter[int]{Key: "A", Value: 1}, nil)
	q.admit(Letter[int]{Key: "A", Value: 2}, nil)
	q.release("A")
	if got := q.heldBack(); got != 1 {
		t.Errorf("%d letters held back with letter 2 ready, want 1", got)
	}
	if ready := q.takeReady(nil, 8); len(ready) != 1 || q.heldBack() != 0 {
		t.Errorf("%d letters taken, %d held back after, want 1 taken and none held back", len(ready), q.heldBack())
	}
}

// Guarantee: an assignment that leaves a key's shard out, told by a
// reader that knows each letter's part without a release before it (a
// part it learned was let go only as the assignment came), gives back
// the key's letters held back of the part let go, for the part's next
// owner, rather than handle them here once the key's message out is
// done with.
func TestAnAssignmentGivesBackTheLettersOfAPartLetGoUntold(t *testing.T) {
	q := newTestSequencer(2, 100)
	parts := &partsReader{gone: map[any]bool{}}
	r := &heldReader[int]{parts: parts}
	out := Letter[int]{Key: "A", Shard: 1, Value: 1, Receipt: "let go"}
	q.admit(out, r)
	q.sentOut(&out)
	q.admit(Letter[int]{Key: "A", Shard: 1, Value: 2, Receipt: "let go"}, r)
	parts.gone["let go"] = true
	got := q.assigned(r, func(shard int) bool { return shard == 0 })
	if len(got) != 1 || got[0].l.Value != 2 {
		t.Errorf("the assignment gave back %d letters, want letter 2", len(got))
	}
	if ready := q.takeReady(nil, 8); len(ready) > 0 || q.heldBack() != 0 {
		t.Errorf("%d letters ready, %d held back, want none", len(ready), q.heldBack())
	}
}

// Guarantee: the letters of a poisoned key that wait to be dead-lettered
// stay for the dead-letter queue, in order, when the run that took them
// fails: its reader's letters given back to the backend are only those
// of keys that are not poisoned, which wait behind their key's message
// in flight.
func TestAPoisonedKeysLettersStayForTheDeadLetterQueueAsItsRunFails(t *testing.T) {
	q, r := newDrainingSequencer(t)
	q.admit(Letter[int]{Key: "B", Shard: 0, Value: 11}, r)
	q.admit(Letter[int]{Key: "B", Shard: 0, Value: 12}, r)
	if got := q.giveBack(r); len(got) != 1 || got[0].l.Value != 12 {
		t.Errorf("the failed run's reader had %d letters given back, want letter 12 alone", len(got))
	}
	if got := q.drained("A"); len(got) != 1 || got[0].l.Value != 3 {
		t.Errorf("draining took %d letters, want letter 3", len(got))
	}
	if got := q.drained("A"); len(got) > 0 || q.heldBack() != 0 {
		t.Errorf("draining again took %d letters, %d held back, want none", len(got), q.heldBack())
	}
}

// Guarantee: a letter ready to take its key's turn counts toward
// MaxHeldBack, and makes room without the reader: at the bound with one
// ready, the run takes no letter past it (nor warns that it does) but
// delivers the ready one first.
func TestASourceAtMaxHeldBackWithALetterReadyTakesNoneUntilItIsDelivered(t *testing.T) {
	q := newTestSequencer(1, 1)
	q.admit(Letter[int]{Key: "A", Value: 1}, nil)
	q.admit(Letter[int]{Key: "A", Value: 2}, nil)
	q.release("A")
	if n, first := q.room(8); n != 0 || first {
		t.Errorf("at MaxHeldBack with letter 2 ready: room %d, %t, want 0, false", n, first)
	}
	if ready := q.takeReady(nil, 8); len(ready) != 1 {
		t.Fatalf("%d letters ready, want letter 2", len(ready))
	}
	if n, _ := q.room(8); n != 1 {
		t.Errorf("once letter 2 was delivered: room %d, want 1", n)
	}
}
