package kafkatopology

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a DLQ reader counts a partition read to its end only once
// the partition's last record is in its read-ahead, not as soon as its
// claim has fetched it: a claim that fetched the last record while the
// read-ahead was full, and has not yet had the chance to buffer it once
// Replay emptied the read-ahead, does not make TryReceive return 0 (which
// ends Replay with that letter left unread in the DLQ).
func TestTryReceiveIsNotCaughtUpWhileTheLastRecordWaitsForRoom(t *testing.T) {
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs(), func(o *Options[msg]) { o.ReadAhead = 1 })
	q := declare(t, b, topology.New("roomy").DLQ())
	death := &topology.Death{Reason: topology.ReasonMaxRetries, Topic: "roomy"}
	for i := range 2 {
		if err := q.DeadLetter(t.Context(), topology.Letter[msg]{Value: topologytest.Msg{N: i}, Death: death}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := q.SubscribeDead(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	gr := r.(*groupReader[msg])
	if err := gr.PinEnd(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The read-ahead (1) holds letter 0, and the claim, holding letter 1,
	// waits for room.
	wait.Within(t, 30*time.Second, "the claim to wait for room with the last record", func() bool {
		gr.mu.Lock()
		defer gr.mu.Unlock()
		return len(gr.items)-gr.head == 1 && gr.room != nil
	})
	// Letter 0 is taken without the claim being let go, as when the
	// reader empties its read-ahead before the claim's goroutine runs.
	gr.mu.Lock()
	taken := gr.items[gr.head]
	gr.items, gr.head = gr.items[:0], 0
	gr.mu.Unlock()
	if taken.Value.N != 0 {
		t.Fatalf("the read-ahead held letter %d, want 0", taken.Value.N)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	dst := make([]topology.Letter[msg], 4)
	n, err := gr.TryReceive(ctx, dst)
	if n == 0 && err == nil {
		t.Fatalf("TryReceive returned 0, nil (caught up) while letter 1, before the pinned end, waits to be buffered")
	}
	if n == 0 && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryReceive = 0, %v; want it still waiting for letter 1 when its ctx ends", err)
	}
	// Room again: the claim buffers letter 1 and the reader delivers it.
	gr.mu.Lock()
	if gr.room != nil {
		close(gr.room)
		gr.room = nil
	}
	gr.mu.Unlock()
	wait.Within(t, 30*time.Second, "letter 1 delivered", func() bool {
		if n > 0 {
			return dst[0].Value.N == 1
		}
		n, _ = gr.TryReceive(t.Context(), dst)
		return n > 0 && dst[0].Value.N == 1
	})
}
