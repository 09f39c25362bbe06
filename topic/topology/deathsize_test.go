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
// whichever backend carries it: at most MaxDeathErrorBytes of the text,
// cut at a character boundary, then how many bytes were cut; a text
// within the bound is carried whole.
func TestBoundDeathErrorKeepsTheStartOfALongText(t *testing.T) {
	const limit = topology.MaxDeathErrorBytes
	cases := []struct {
		name, text string
		kept       int // bytes of text kept; -1: the whole text, nothing added
	}{
		{"empty", "", -1},
		{"at the bound", strings.Repeat("a", limit), -1},
		{"one byte over", strings.Repeat("a", limit+1), limit},
		// A two-byte character straddles the bound: it is left out whole.
		{"character across the bound", strings.Repeat("a", limit-1) + "é" + "b", limit - 1},
		// A four-byte character ends at the bound: it is kept.
		{"character up to the bound", strings.Repeat("a", limit-4) + "😀" + "b", limit},
		// Not UTF-8: nothing to find a boundary by, cut at the bound.
		{"not UTF-8", strings.Repeat("\x80", limit+10), limit},
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
		buf := make([]topology.Letter[int], 2)
		n, err := r.TryReceive(t.Context(), buf)
		if err != nil || n != 1 {
			t.Fatalf("TryReceive on the DLQ = %d, %v, want the dead letter", n, err)
		}
		topologytest.ExpectBoundedDeathError(t, long, buf[0].Death.Error)
	})
}
