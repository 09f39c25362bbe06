package topologytest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
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
	ws, watch := payloadWatch(n, &mu)
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
	msgs := largeMsgs(n)
	s.publish(q, msgs...)
	clear(msgs)
	s.eventually("every outcome", 2*time.Minute, func() bool {
		st, ds := c.src.Stats(), dead.src.Stats()
		return st.Acked == n-n/3 && st.DeadLettered == n/3 && ds.Acked == n/3
	})
	s.quiet()
	mu.Lock()
	defer mu.Unlock()
	s.notKept(ws, 2*slabMessages)
}

// notKept checks that, but for at most allowed messages, no message
// still has a payload reachable of those ws points to (by message
// number).
func (s *h) notKept(ws [][]weak.Pointer[byte], allowed int) {
	s.Helper()
	n := len(ws)
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
	s.Logf("%d of %d payloads still reachable (at most %d allowed)", live, n, allowed)
	if live > allowed {
		s.Errorf("%d of %d payloads still reachable after their outcomes were reported, want at most %d", live, n, allowed)
	}
}

// payloadWatch returns ws, weak pointers to the payloads (keys) of n
// messages by number, and watch, which adds one for m under mu.
func payloadWatch(n int, mu *sync.Mutex) (ws [][]weak.Pointer[byte], watch func(m Msg)) {
	ws = make([][]weak.Pointer[byte], n)
	return ws, func(m Msg) {
		mu.Lock()
		ws[m.N] = append(ws[m.N], weak.Make(unsafe.StringData(m.Key)))
		mu.Unlock()
	}
}

// largeMsgs returns n messages numbered from 0, each with a key of its
// own of about 1 KiB.
func largeMsgs(n int) []Msg {
	msgs := make([]Msg, n)
	for i := range msgs {
		msgs[i] = Msg{Key: fmt.Sprintf("%03d", i) + strings.Repeat("k", 1<<10), N: i}
	}
	return msgs
}

// Guarantee: once a message was retried through a hold queue,
// dead-lettered, replayed from the DLQ and then handled and acknowledged,
// neither the source, its hold queue, the DLQ, Replay nor the backend
// keeps its payload (a key of 1 KiB) of any attempt, but for the messages
// of the current slab blocks of the source's runs.
func replayedPayloadsAreNotKept(s *h) {
	const n = 600
	q := s.declare(topology.New("replayed").Hold(hold1).DLQ())
	var (
		mu    sync.Mutex
		fixed atomic.Bool
	)
	ws, watch := payloadWatch(n, &mu)
	s.unlogged = true
	c := s.consume(q, false, topology.SourceOptions[Msg]{}, func(_ context.Context, m Msg, d *topology.Delivery) error {
		watch(m)
		switch {
		case fixed.Load():
			return nil
		case d.Retries == 0:
			return topology.Retry(errFlaky)
		}
		return topology.Reject(errFlaky)
	}, nil)
	msgs := largeMsgs(n)
	s.publish(q, msgs...)
	clear(msgs)
	s.eventually("every message dead-lettered after a retry", 2*time.Minute, func() bool {
		st := c.src.Stats()
		return st.Retried == n && st.DeadLettered == n
	})
	s.quiet()
	fixed.Store(true)
	// The report, which holds the replayed letters, is dropped on return.
	replayed, err := func() (int, error) {
		rep, err := topology.Replay(s.ctx, q, topology.ReplayOptions[Msg]{Filter: func(l *topology.Letter[Msg]) bool {
			watch(l.Value)
			return true
		}})
		return len(rep.Replayed), err
	}()
	if err != nil || replayed != n {
		s.Fatalf("replay: %d replayed, %v; want %d", replayed, err, n)
	}
	s.eventually("every replayed message acked", 2*time.Minute, func() bool { return c.src.Stats().Acked == n })
	s.quiet()
	mu.Lock()
	defer mu.Unlock()
	s.notKept(ws, 2*slabMessages)
}

// Guarantee: letters a reader received and had not settled when the
// backend closed are not kept by the closed backend nor by the reader,
// whether they are then settled (refused, as the backend is closed) or
// never are: their payloads (keys of 1 KiB) become unreachable while both
// are still referenced.
func unsettledLettersAreNotKeptPastClose(s *h) {
	const n = 200
	q := s.declare(topology.New("unsettled").Hold(hold1).DLQ())
	r, err := q.Subscribe(s.ctx)
	if err != nil {
		s.Fatalf("Subscribe: %v", err)
	}
	msgs := largeMsgs(n)
	s.publish(q, msgs...)
	clear(msgs)
	var mu sync.Mutex
	ws, watch := payloadWatch(n, &mu)
	func() {
		ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
		defer cancel()
		letters := make([]topology.Letter[Msg], 0, n)
		buf := make([]topology.Letter[Msg], 64)
		for len(letters) < n {
			k, err := r.Receive(ctx, buf)
			if err != nil {
				s.Fatalf("Receive after %d letters: %v", len(letters), err)
			}
			letters = append(letters, buf[:k]...)
		}
		clear(buf)
		for i := range letters {
			watch(letters[i].Value)
		}
		if err := s.closes(ctx, "the backend", s.be.Close, 30*time.Second); err != nil {
			s.Errorf("closing the backend: %v", err)
		}
		// Half the letters are settled after the close, the others never.
		for i := range letters[:n/2] {
			_ = r.Settle(ctx, &letters[i])
		}
	}()
	s.quiet()
	mu.Lock()
	defer mu.Unlock()
	s.notKept(ws, 0)
	runtime.KeepAlive(r)
	runtime.KeepAlive(s.be)
}
