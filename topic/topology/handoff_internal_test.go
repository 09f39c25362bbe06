package topology

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// Guarantee: a sequenced source takes no new letter once it keeps exactly
// MaxHeldBack letters whose hand-off the backend refused (not one more or
// one fewer), still none while a hand-off taken at last leaves it at the
// bound, and takes letters again once it keeps fewer than MaxHeldBack or
// once it closes.
func TestRefusedHandOffsStopTheSourceAtExactlyMaxHeldBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxHeldBack = 3
		m, err := NewMemory[int](MemoryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		top, err := New("ledger").Sequenced(Skip).Hold(time.Second).Build()
		if err != nil {
			t.Fatal(err)
		}
		q, err := m.Declare(t.Context(), top)
		if err != nil {
			t.Fatal(err)
		}
		refused := errors.New("hold topic unavailable")
		s, err := NewSource(SourceOptions[int]{Queues: refusingHold{q, refused}, MaxHeldBack: maxHeldBack, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		hs := &s.handOffs
		keep := func(i int) {
			t.Helper()
			p := &pendingLetter[int]{l: Letter[int]{Key: strconv.Itoa(i), Value: i}}
			if !s.retryHandOff(p, p.l, handOffHold, 0, refused) {
				t.Fatalf("letter %d whose hold was refused not kept by a running source", i)
			}
		}
		for i := 1; i < maxHeldBack; i++ {
			keep(i)
			if hs.roomWait() != nil {
				t.Fatalf("the source takes no new letters with %d refused hand-offs kept, want it to until MaxHeldBack (%d)", i, maxHeldBack)
			}
		}
		keep(maxHeldBack)
		room := hs.roomWait()
		if room == nil {
			t.Fatalf("the source still takes new letters with MaxHeldBack (%d) refused hand-offs kept", maxHeldBack)
		}
		keep(maxHeldBack + 1) // a letter in flight at the bound fails too
		hs.retried()
		if hs.roomWait() == nil {
			t.Fatalf("the source takes new letters again with MaxHeldBack (%d) refused hand-offs still kept", maxHeldBack)
		}
		hs.retried()
		select {
		case <-room:
		default:
			t.Fatalf("the source still waits with %d refused hand-offs kept, fewer than MaxHeldBack (%d)", maxHeldBack-1, maxHeldBack)
		}
		if hs.roomWait() != nil {
			t.Fatalf("the source takes no new letters with %d refused hand-offs kept, fewer than MaxHeldBack (%d)", maxHeldBack-1, maxHeldBack)
		}
		keep(maxHeldBack + 2) // at the bound again
		room = hs.roomWait()
		if room == nil {
			t.Fatalf("the source still takes new letters back at MaxHeldBack (%d) refused hand-offs kept", maxHeldBack)
		}
		time.Sleep(time.Minute) // fake time: the kept letters are tried again, refused
		if back := hs.close(); len(back) != maxHeldBack+2 {
			t.Fatalf("close gave back %d letters, want the %d kept", len(back), maxHeldBack+2)
		}
		select {
		case <-room:
		default:
			t.Fatal("a run waiting for room at MaxHeldBack still waits once the source closed")
		}
	})
}

// refusingHold fails every Hold with err.
type refusingHold struct {
	Queues[int]
	err error
}

func (q refusingHold) Hold(context.Context, int, Letter[int]) error { return q.err }
