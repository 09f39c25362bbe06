package topologytest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unsafe"
	"weak"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// slabMessages is how many messages a message.Slab block holds (a block is
// about 8 KiB). A source's run makes its messages from a slab, whose
// current block stays reachable, with the payloads of the messages carved
// from it, until the block is used up.
const slabMessages = (8192 - 8) / int(unsafe.Sizeof(message.Message[Msg]{}))

// Guarantee: once a message was retried through a hold queue, or
// dead-lettered and its letter taken from the DLQ, and acknowledged,
// neither the source, its hold queues, the DLQ's reader nor the backend
// keeps its payload (a key of 1 KiB), but for the messages of the current
// slab block of each source's run (the source's and the dead source's: at
// most 2 × slabMessages).
func settledPayloadsAreNotKept(s *h) {
	const n = 600
	q := s.declare(topology.New("retain").Hold(hold1).DLQ())
	var mu sync.Mutex
	ws := make([][]weak.Pointer[byte], n)
	watch := func(m Msg) {
		mu.Lock()
		ws[m.N] = append(ws[m.N], weak.Make(unsafe.StringData(m.Key)))
		mu.Unlock()
	}
	s.unlogged = true
	c := s.consume(q, false, topology.SourceOptions[Msg]{}, func(_ context.Context, m Msg, d *topology.Delivery) error {
		watch(m)
		switch {
		case m.N%3 == 0:
			return topology.Reject(errFlaky)
		case d.Retries == 0:
			return topology.Retry(errFlaky)
		}
		return nil
	}, nil)
	dead := s.consume(q, true, topology.SourceOptions[Msg]{}, func(_ context.Context, m Msg, _ *topology.Delivery) error {
		watch(m)
		return nil
	}, nil)
	msgs := make([]Msg, n)
	for i := range msgs {
		msgs[i] = Msg{Key: fmt.Sprintf("%03d", i) + strings.Repeat("k", 1<<10), N: i}
	}
	s.publish(q, msgs...)
	clear(msgs)
	s.eventually("every outcome", 2*time.Minute, func() bool {
		st, ds := c.src.Stats(), dead.src.Stats()
		return st.Acked == n-n/3 && st.DeadLettered == n/3 && ds.Acked == n/3
	})
	s.quiet()
	mu.Lock()
	defer mu.Unlock()
	var all []weak.Pointer[byte]
	for _, w := range ws {
		all = append(all, w...)
	}
	wait.Reachable(all)
	live := 0
	for _, w := range ws {
		for _, p := range w {
			if p.Value() != nil {
				live++
				break
			}
		}
	}
	s.Logf("%d of %d payloads still reachable (at most %d allowed)", live, n, 2*slabMessages)
	if live > 2*slabMessages {
		s.Errorf("%d of %d payloads still reachable after their outcomes were reported, want at most %d", live, n, 2*slabMessages)
	}
}
