package topology_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a failure text is bounded before it goes into a dead letter,
// whichever backend carries it: at most MaxDeathErrorBytes in all, the
// start of the text cut at a character boundary, then how many bytes were
// cut; a text within the bound is carried whole; and a text bounded once
// (by the source) is carried unchanged by a backend that bounds it again,
// so its count of bytes cut stays that of the original.
func TestBoundDeathErrorKeepsTheStartOfALongText(t *testing.T) {
	const limit = topology.MaxDeathErrorBytes
	// room is what is kept of a text of n bytes, n over the bound, when
	// its bytes there are single characters: the bound less the note.
	room := func(n int) int { return limit - len(" … ( bytes cut)") - len(strconv.Itoa(n)) }
	cases := []struct {
		name, text string
		kept       int // bytes of text kept; -1: the whole text, nothing added
	}{
		{"empty", "", -1},
		{"at the bound", strings.Repeat("a", limit), -1},
		{"one byte over", strings.Repeat("a", limit+1), room(limit + 1)},
		{"a million bytes over", strings.Repeat("a", limit+1e6), room(limit + 1e6)},
		// A two-byte character straddles the end of the room: it is left
		// out whole.
		{"character across the cut", strings.Repeat("a", room(limit+100)-1) + "é" + strings.Repeat("b", 100), room(limit+100) - 1},
		// A four-byte character ends where the room does: it is kept.
		{"character up to the cut", strings.Repeat("a", room(limit+100)-4) + "😀" + strings.Repeat("b", 104), room(limit + 100)},
		// Not UTF-8: nothing to find a boundary by, cut where the room ends.
		{"not UTF-8", strings.Repeat("\x80", limit+10), room(limit + 10)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := topology.BoundDeathError(c.text)
			if c.kept < 0 {
				if got != c.text {
					t.Fatalf("BoundDeathError of %d bytes changed it to %d bytes", len(c.text), len(got))
				}
				return
			}
			want := c.text[:c.kept] + " … (" + strconv.Itoa(len(c.text)-c.kept) + " bytes cut)"
			if got != want {
				t.Fatalf("BoundDeathError of %d bytes = %d bytes ending %q, want %d ending %q",
					len(c.text), len(got), got[max(len(got)-24, 0):], len(want), want[max(len(want)-24, 0):])
			}
			if len(got) > limit {
				t.Fatalf("BoundDeathError of %d bytes = %d bytes, over MaxDeathErrorBytes (%d)", len(c.text), len(got), limit)
			}
			if again := topology.BoundDeathError(got); again != got {
				t.Fatalf("BoundDeathError of its own %d-byte result cut it again, to %d bytes ending %q",
					len(got), len(again), again[max(len(again)-24, 0):])
			}
		})
	}
}

// Guarantee: a message rejected with a failure text longer than any
// broker takes reaches the DLQ, its Death.Error bounded by
// MaxDeathErrorBytes (the source bounds it, so every backend carries the
// same text).
func TestARejectionWithALongErrorIsDeadLetteredBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(t.Context())
		top, err := topology.New("long").DLQ().Build()
		if err != nil {
			t.Fatal(err)
		}
		q, err := m.Declare(t.Context(), top)
		if err != nil {
			t.Fatal(err)
		}
		src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		long := strings.Repeat("why ", 2<<20)
		p, err := pipeline.New(pipeline.Options[int, int]{
			Name:     "long",
			Logger:   slog.New(slog.DiscardHandler),
			Producer: producer.Options[int]{Source: src},
			Processors: processor.Options[int, int]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				return 0, topology.Reject(errors.New(long))
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := q.Publish(t.Context(), topology.Letter[int]{Value: 7}); err != nil {
			t.Fatal(err)
		}
		for src.Stats().DeadLettered < 1 {
			time.Sleep(time.Millisecond)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		r, err := q.SubscribeDead(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(t.Context())
		topologytest.ExpectBoundedDeathError(t, long, onlyLetter(t, r, "the dead letter").Death.Error)
	})
}
