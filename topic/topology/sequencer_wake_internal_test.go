package topology

import (
	"context"
	"testing"
)

// watched returns a context that q ends as it wakes its run (see watch),
// and forgets the watch at the test's end.
func watched(t *testing.T, q *sequencer[int]) context.Context {
	t.Helper()
	w := &waker{}
	ctx := q.watch(context.Background(), w)
	t.Cleanup(func() { q.unwatch(w) })
	return ctx
}

// Guarantee: a sequenced source's run waiting on its reader is woken as
// soon as it has something else to do: a letter of a key became ready
// (its key's turn came, or a message was put back), or letters held back
// left the sequencer (dead-lettered behind a poisoned key, given back as
// the reader let their part go or as its run failed, or handled
// elsewhere as an assignment left their shard out), making room below
// MaxHeldBack, or, at
// MaxHeldBack exactly, a key's message went out to the backend, which
// may leave the run nothing to wait for but the reader.
func TestASequencedRunWaitingOnItsReaderIsWokenWhenItHasWorkElsewhere(t *testing.T) {
	a := func(v int) Letter[int] { return Letter[int]{Key: "A", Value: v} }
	for _, c := range []struct {
		name string
		// setup brings the sequencer, of MaxHeldBack 1, to the state
		// the run waits in; act is what must wake it.
		setup, act func(q *sequencer[int], r *heldReader[int])
	}{
		{"the key's turn passes to a letter held back",
			func(q *sequencer[int], r *heldReader[int]) { q.admit(a(1), r); q.admit(a(2), r) },
			func(q *sequencer[int], _ *heldReader[int]) { q.release("A") }},
		{"a message is put back",
			func(q *sequencer[int], r *heldReader[int]) { q.admit(a(1), r) },
			func(q *sequencer[int], r *heldReader[int]) { q.putBack(pendingLetter[int]{l: a(1), r: r}) }},
		{"a key is poisoned with letters held back",
			func(q *sequencer[int], r *heldReader[int]) { q.admit(a(1), r); q.admit(a(2), r) },
			func(q *sequencer[int], _ *heldReader[int]) { q.poison("A", 0, "failed") }},
		{"a poisoned key's later letters are taken to be dead-lettered",
			func(q *sequencer[int], r *heldReader[int]) {
				q.admit(a(1), r)
				q.poison("A", 0, "failed")
				q.admit(a(2), r)
			},
			func(q *sequencer[int], _ *heldReader[int]) { q.drained("A") }},
		{"the reader lets its shard go",
			func(q *sequencer[int], r *heldReader[int]) { q.admit(a(1), r); q.admit(a(2), r) },
			func(q *sequencer[int], r *heldReader[int]) { q.letGo(r, func(int) bool { return true }) }},
		{"the reader's letters held back are given back as its run fails",
			func(q *sequencer[int], r *heldReader[int]) { q.admit(a(1), r); q.admit(a(2), r) },
			func(q *sequencer[int], r *heldReader[int]) { q.giveBack(r) }},
		{"an assignment leaves the key's shard out",
			func(q *sequencer[int], r *heldReader[int]) { q.admit(a(1), r); q.admit(a(2), r) },
			func(q *sequencer[int], r *heldReader[int]) { q.assigned(r, func(int) bool { return false }) }},
		{"the key's message goes out with MaxHeldBack letters held back",
			func(q *sequencer[int], r *heldReader[int]) { q.admit(a(1), r); q.admit(a(2), r) },
			func(q *sequencer[int], _ *heldReader[int]) { q.sentOut(&Letter[int]{Key: "A", Value: 1}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := newTestSequencer(1, 1)
			r := &heldReader[int]{}
			c.setup(q, r)
			ctx := watched(t, q)
			if ctx.Err() != nil {
				t.Fatal("the run was woken before")
			}
			c.act(q, r)
			if ctx.Err() == nil {
				t.Errorf("the run waiting on its reader was not woken")
			}
		})
	}
}
