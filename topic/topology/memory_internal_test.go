package topology

import (
	"context"
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// Guarantee: a hold queue runs one goroutine whatever it holds, and
// releases its letters to its group in order, each when its delay has
// passed.
func TestHoldQueueOneGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := NewMemory[int](MemoryOptions{Capacity: 2000})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(t.Context())
		top, err := New("h").Hold(5 * time.Second).Build()
		if err != nil {
			t.Fatal(err)
		}
		q, err := m.Declare(t.Context(), top)
		if err != nil {
			t.Fatal(err)
		}
		before := runtime.NumGoroutine()
		start := time.Now()
		for i := range 1000 {
			if err := q.Hold(t.Context(), 0, Letter[int]{Value: i}); err != nil {
				t.Fatal(err)
			}
			if i == 499 {
				time.Sleep(time.Second) // fake time: the second half is due a second later
			}
		}
		synctest.Wait()
		// The count is the process's: a goroutine of an earlier test
		// still ending may leave it, never one of these letters join it.
		if n := runtime.NumGoroutine(); n > before {
			t.Errorf("%d goroutines while holding 1000 letters, %d before", n, before)
		}
		if got := m.Held("h-hold-5s"); got != 1000 {
			t.Fatalf("Held = %d, want 1000", got)
		}
		r, err := q.Subscribe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(t.Context())
		buf := make([]Letter[int], 1000)
		got := 0
		for got < 1000 {
			n, err := r.Receive(t.Context(), buf)
			if err != nil {
				t.Fatal(err)
			}
			at := time.Since(start)
			for _, l := range buf[:n] {
				if l.Value != got {
					t.Fatalf("released %d, want %d", l.Value, got)
				}
				want := 5 * time.Second
				if got >= 500 {
					want = 6 * time.Second
				}
				if at != want {
					t.Fatalf("letter %d released after %s, want %s", got, at, want)
				}
				got++
			}
		}
	})
}

// Guarantee: a closed backend refuses declarations and every queue
// operation with ErrClosed, and its readers end with ErrClosed once
// drained.
func TestMemoryClosed(t *testing.T) {
	m, err := NewMemory[int](MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	top, _ := New("c").Hold(time.Second).DLQ().Build()
	q, err := m.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := q.Subscribe(t.Context())
	if err := q.Publish(t.Context(), Letter[int]{Value: 1}); err != nil {
		t.Fatal(err)
	}
	m.Close(t.Context())
	m.Close(t.Context())
	buf := make([]Letter[int], 4)
	if n, err := r.Receive(t.Context(), buf); n != 1 || err != nil {
		t.Errorf("Receive after Close = %d, %v; want the queued letter", n, err)
	}
	if _, err := r.Receive(t.Context(), buf); !errors.Is(err, ErrClosed) {
		t.Errorf("Receive when drained = %v, want ErrClosed", err)
	}
	if _, err := m.Declare(t.Context(), top); !errors.Is(err, ErrClosed) {
		t.Errorf("Declare = %v", err)
	}
	for name, err := range map[string]error{
		"Publish":    q.Publish(t.Context(), Letter[int]{}),
		"Hold":       q.Hold(t.Context(), 0, Letter[int]{}),
		"Requeue":    q.Requeue(t.Context(), Letter[int]{}),
		"DeadLetter": q.DeadLetter(t.Context(), Letter[int]{}),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// Guarantee: a closed reader wakes a Receive waiting on it.
func TestReaderCloseWakesReceive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := NewMemory[int](MemoryOptions{})
		defer m.Close(t.Context())
		top, _ := New("w").Build()
		q, _ := m.Declare(t.Context(), top)
		r, _ := q.Subscribe(context.Background())
		done := make(chan error)
		go func() {
			_, err := r.Receive(context.Background(), make([]Letter[int], 1))
			done <- err
		}()
		synctest.Wait()
		r.Close(t.Context())
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("Receive = %v, want ErrClosed", err)
		}
	})
}

// Guarantee: broadcast consumers coming and going never make a publish
// fail, and every consumer connected throughout receives every message.
func TestBroadcastChurnNeverFailsPublish(t *testing.T) {
	m, _ := NewMemory[int](MemoryOptions{Capacity: 1 << 14})
	defer m.Close(t.Context())
	top, _ := New("churn").Broadcast().Build()
	q, _ := m.Declare(t.Context(), top)
	steady, _ := q.Subscribe(t.Context())
	defer steady.Close(t.Context())
	stop := make(chan struct{})
	churned := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				churned <- n
				return
			default:
			}
			r, err := q.Subscribe(t.Context())
			if err != nil {
				t.Error(err)
			}
			r.Close(t.Context())
			n++
		}
	}()
	halt := func() int {
		select {
		case <-stop:
			return 0
		default:
		}
		close(stop)
		return <-churned
	}
	defer halt()
	const msgs = 5000
	for i := range msgs {
		if err := q.Publish(t.Context(), Letter[int]{Value: i}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	t.Logf("%d subscriptions came and went", halt())
	buf := make([]Letter[int], 256)
	for got := 0; got < msgs; {
		n, err := steady.TryReceive(t.Context(), buf)
		if err != nil || n == 0 {
			t.Fatalf("steady consumer got %d of %d: %v", got, msgs, err)
		}
		for _, l := range buf[:n] {
			if l.Value != got {
				t.Fatalf("got %d, want %d", l.Value, got)
			}
			got++
		}
	}
}

// Guarantee: a message of a key whose handling the shutdown interrupted
// goes back ahead of its key's held-back messages, and drain returns it
// first of them; once drain has run, the sequencer keeps nothing more (the
// source then requeues the message itself, so it is not lost).
func TestSequencerPutBackLeadsItsKeyUntilDrained(t *testing.T) {
	q := &sequencer[int]{keys: map[string]*keyState[int]{}, wakers: map[*waker]struct{}{}}
	letter := func(v int) pendingLetter[int] { return pendingLetter[int]{l: Letter[int]{Key: "A", Value: v}} }
	if q.admit(letter(1).l, nil) != admitDeliver {
		t.Fatal("the first message of a key was not admitted")
	}
	for _, v := range []int{2, 3} {
		if q.admit(letter(v).l, nil) != admitHeldBack {
			t.Fatalf("message %d not held back while its key is taken", v)
		}
	}
	if !q.putBack(letter(1)) {
		t.Fatal("putBack refused before drain")
	}
	var got []int
	for _, p := range q.drain() {
		got = append(got, p.l.Value)
	}
	if !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("drain returned %v, want [1 2 3]", got)
	}
	if q.putBack(letter(4)) {
		t.Fatal("putBack kept a message after drain")
	}
	if n := len(q.drain()); n != 0 {
		t.Fatalf("a second drain returned %d messages, want none", n)
	}
}

// Guarantee: at MaxHeldBack the sequencer lets its run take nothing while
// a key with letters held back has its message in flight (its end makes
// room), one letter at a time, reported once, while every such key's
// message is out in the backend (only the reader brings it back), and
// room again once below the bound.
func TestSequencerRoomAtTheBound(t *testing.T) {
	q := &sequencer[int]{limit: 2, keys: map[string]*keyState[int]{}, wakers: map[*waker]struct{}{}}
	letter := func(key string, v int, resume bool) Letter[int] {
		return Letter[int]{Key: key, Value: v, Resume: resume}
	}
	check := func(what string, wantN int, wantFirst bool) {
		t.Helper()
		if n, first := q.room(8); n != wantN || first != wantFirst {
			t.Errorf("%s: room = %d, %t; want %d, %t", what, n, first, wantN, wantFirst)
		}
	}
	check("empty", 2, false)
	q.admit(letter("A", 1, false), nil)
	q.admit(letter("B", 1, false), nil)
	q.admit(letter("A", 2, false), nil)
	check("one held back", 1, false)
	q.admit(letter("B", 2, false), nil)
	check("at the bound, A1 and B1 in flight", 0, false)
	q.sentOut(&Letter[int]{Key: "A"})
	check("at the bound, B1 in flight", 0, false)
	q.sentOut(&Letter[int]{Key: "B"})
	check("at the bound, A1 and B1 out", 1, true)
	q.admit(letter("A", 3, false), nil)
	check("past the bound, still out", 1, false)
	q.admit(letter("A", 1, true), nil) // A1 back
	check("past the bound, A1 back in flight", 0, false)
	q.release("A")
	if got := len(q.takeReady(nil, 8)); got != 1 {
		t.Fatalf("%d letters ready after A1 went, want A2", got)
	}
	check("A2 in flight, A3 and B2 held back", 0, false)
	q.release("A")
	q.takeReady(nil, 8)
	check("below the bound", 1, false)
	q.sentOut(&Letter[int]{Key: "A"}) // A3 out, B1 out, B2 held back
	q.release("B")                    // B1 (had it come back) acked: B2 goes
	q.takeReady(nil, 8)
	if q.waitingKeys != 0 || q.outKeys != 0 || q.held != 0 {
		t.Errorf("nothing held back, yet waitingKeys %d, outKeys %d, held %d", q.waitingKeys, q.outKeys, q.held)
	}
	check("nothing held back", 2, false)
}

// Guarantee: a sequenced source keeps bookkeeping only for the keys with a
// message in flight or held back (and poisoned ones): after any number of
// distinct keys have come and gone (BOULEVARD_SCALE_KEYS, 100,000 by
// default), it remembers none of them, and keeps at most 1,024 spare key
// states for reuse.
func TestSequencerForgetsKeysThatWentQuiet(t *testing.T) {
	keys := 100_000
	if v, err := strconv.Atoi(os.Getenv("BOULEVARD_SCALE_KEYS")); err == nil && v > 0 {
		keys = v
	}
	const inFlight = 64
	q := &sequencer[int]{keys: map[string]*keyState[int]{}, wakers: map[*waker]struct{}{}}
	name := func(i int) string { return "k" + strconv.Itoa(i) }
	for i := range keys + inFlight {
		if i < keys && q.admit(Letter[int]{Key: name(i), Value: i}, nil) != admitDeliver {
			t.Fatalf("the first message of key %s was not admitted", name(i))
		}
		if j := i - inFlight; j >= 0 {
			q.release(name(j))
		}
		if n := len(q.keys); n > inFlight {
			t.Fatalf("%d keys remembered with %d messages in flight", n, inFlight)
		}
	}
	if n := len(q.keys); n != 0 {
		t.Fatalf("%d of %d keys remembered once every message was handled, want 0", n, keys)
	}
	if n := len(q.free); n > 1024 {
		t.Fatalf("%d spare key states kept, want at most 1024", n)
	}
}

// Guarantee: the in-memory backend keeps no queue of a broadcast reader
// once it is closed: consumers coming and going leave the topic with the
// groups of the readers still open only.
func TestAClosedBroadcastReaderLeavesNoGroupBehind(t *testing.T) {
	m, _ := NewMemory[int](MemoryOptions{})
	defer m.Close(t.Context())
	top, _ := New("churn").Broadcast().Build()
	q, _ := m.Declare(t.Context(), top)
	steady, _ := q.Subscribe(t.Context())
	defer steady.Close(t.Context())
	const readers = 1000
	for range readers {
		r, err := q.Subscribe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		r.Close(t.Context())
	}
	tp := m.topics["churn"]
	tp.mu.Lock()
	n := len(tp.groups)
	tp.mu.Unlock()
	if n != 1 {
		t.Fatalf("after %d broadcast readers came and went beside one open, the topic keeps %d groups, want 1", readers, n)
	}
}
