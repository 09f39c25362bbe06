package pulsar

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/acker"
)

const (
	// ackQueueSize is how many acks and nacks a consumer's queue holds
	// for its ack goroutine, which hands them to the client. Processors
	// hand their outcomes over into this queue, never to the client
	// directly: pulsar-client-go handles a consumer's reconnection in the
	// same event loop as its acks (without grouping, with
	// AckWithResponse, or at each grouping flush), so a call to the
	// client can wait for a whole reconnection.
	ackQueueSize = 1024
	// ackChunk is the most acks the ack goroutine hands to the client
	// before it gives their room back to the queue.
	ackChunk = 128
	// ackRoomWait is how long an Ack call finding the queue full waits
	// for room: it waits as long as the ack goroutine makes room at
	// least this often, and drops the outcomes that do not fit once it
	// made none for this long (or the call's context ended).
	ackRoomWait = 100 * time.Millisecond
	// ackDrainStall is how long closing a consumer waits for its ack
	// goroutine to hand the client another ack before it gives the rest
	// of the queue up and closes the consumer (which ends a
	// reconnection the client is waiting for).
	ackDrainStall = 250 * time.Millisecond
)

// ackOp is one outcome to hand to the client: an ack, or a nack.
type ackOp struct {
	m    pulsar.Message
	nack bool
}

// ackQueue is the bounded queue between a consumer's Ack calls and its ack
// goroutine (sendAcks): a ring of ackQueueSize operations, filled under mu
// one chunk of outcomes at a time.
type ackQueue struct {
	mu   sync.Mutex
	ring []ackOp
	head int // first queued operation
	n    int // queued operations, those the ack goroutine is sending included
	// idle is set while the ack goroutine waits for operations on wake.
	idle bool
	wake chan struct{}
	// waiters is the number of Ack calls waiting on room, which the ack
	// goroutine closes (and replaces) when it makes room.
	waiters int
	room    chan struct{}
	// stalled is set when an Ack call gave up waiting for room, and
	// cleared when the ack goroutine makes room again: while it is set,
	// outcomes that do not fit are dropped without waiting, and the
	// event is logged once.
	stalled bool
	// closing is set when the consumer closes: no operation is queued
	// any more, and the ack goroutine returns once the queue is empty.
	closing bool

	// abort tells the ack goroutine to make no further call to the
	// client and to drop what is queued.
	abort atomic.Bool
	// sent counts the operations handed to the client, for close's
	// progress check.
	sent atomic.Uint64
	done chan struct{}
}

func newAckQueue() *ackQueue {
	return &ackQueue{
		ring: make([]ackOp, ackQueueSize),
		wake: make(chan struct{}, 1),
		room: make(chan struct{}),
		done: make(chan struct{}),
	}
}

// fill queues the operations of successful[i:] and failed[j:] while there
// is room (q.mu held), and returns where it stopped.
func (q *ackQueue) fill(successful, failed []acker.Outcome, i, j int) (int, int) {
	for ; i < len(successful) && q.n < len(q.ring); i++ {
		if pm, ok := successful[i].Data.(pulsar.Message); ok {
			q.put(ackOp{m: pm})
		}
	}
	if i < len(successful) {
		return i, j
	}
	for ; j < len(failed) && q.n < len(q.ring); j++ {
		o := &failed[j]
		if pm, ok := o.Data.(pulsar.Message); ok && !acker.Interrupted(*o) {
			q.put(ackOp{m: pm, nack: o.Disposition != acker.DispositionDiscard})
		}
	}
	return i, j
}

func (q *ackQueue) put(op ackOp) {
	q.ring[(q.head+q.n)%len(q.ring)] = op
	q.n++
}

// pending counts the operations successful and failed would queue.
func pending(successful, failed []acker.Outcome) int {
	n := 0
	for i := range successful {
		if _, ok := successful[i].Data.(pulsar.Message); ok {
			n++
		}
	}
	for j := range failed {
		if _, ok := failed[j].Data.(pulsar.Message); ok && !acker.Interrupted(failed[j]) {
			n++
		}
	}
	return n
}

// enqueue hands the operations of successful and failed to the ack
// goroutine: one lock per call while they fit. When the queue is full it
// waits for room while the ack goroutine makes some at least every
// ackRoomWait (or until ctx ends), then drops the rest: see Ack.
func (c *consumer) enqueue(ctx context.Context, successful, failed []acker.Outcome) {
	q := c.acks
	var (
		i, j  int
		timer *time.Timer
	)
	for {
		q.mu.Lock()
		if q.closing {
			q.mu.Unlock()
			c.dropGone(ctx, pending(successful[i:], failed[j:]))
			break
		}
		i, j = q.fill(successful, failed, i, j)
		wake := q.idle && q.n > 0
		if wake {
			q.idle = false
		}
		rest := i < len(successful) || j < len(failed)
		stalled := q.stalled
		var room chan struct{}
		if rest && !stalled {
			q.waiters++
			room = q.room
		}
		q.mu.Unlock()
		if wake {
			select {
			case q.wake <- struct{}{}:
			default:
			}
		}
		if !rest {
			break
		}
		if stalled {
			// Logged when the stall began.
			c.src.droppedAcks.Add(int64(pending(successful[i:], failed[j:])))
			break
		}
		if timer == nil {
			timer = time.NewTimer(ackRoomWait)
			defer timer.Stop()
		} else {
			timer.Reset(ackRoomWait)
		}
		var gaveUp bool
		select {
		case <-room:
		case <-timer.C:
			gaveUp = true
		case <-ctx.Done():
			gaveUp = true
		}
		q.mu.Lock()
		q.waiters--
		began := gaveUp && !q.stalled
		if gaveUp {
			q.stalled = true
		}
		q.mu.Unlock()
		if gaveUp {
			n := pending(successful[i:], failed[j:])
			c.src.droppedAcks.Add(int64(n))
			if began {
				c.log.WarnContext(ctx, "pulsar acknowledgements wait for the client (it may be reconnecting the consumer) and its ack queue is full; outcomes are dropped until it takes acks again, and the broker redelivers those messages",
					slog.String("consumer", c.name), slog.Int("dropped", n), slog.Int("ack_queue", len(q.ring)),
					slog.String("later_outcomes", "not logged; counted in Stats().DroppedAcks"))
			}
			break
		}
	}
}

// sendAcks is the consumer's ack goroutine: it hands the queued operations
// to the client in order, until the consumer closes and the queue is
// empty, or close aborts it.
func (c *consumer) sendAcks() {
	q := c.acks
	defer close(q.done)
	for {
		q.mu.Lock()
		if q.n == 0 && !q.closing {
			// Let the processors run before sleeping: the next chunk of
			// outcomes is then often queued already, and handing it over
			// needs no wake-up.
			q.mu.Unlock()
			runtime.Gosched()
			q.mu.Lock()
		}
		for q.n == 0 && !q.closing {
			q.idle = true
			q.mu.Unlock()
			<-q.wake
			q.mu.Lock()
		}
		if q.n == 0 {
			q.mu.Unlock()
			return
		}
		k := min(q.n, len(q.ring)-q.head, ackChunk)
		ops := q.ring[q.head : q.head+k]
		q.mu.Unlock()

		sent := c.send(ops)
		clear(ops)

		q.mu.Lock()
		q.head = (q.head + k) % len(q.ring)
		q.n -= k
		q.stalled = false
		if q.waiters > 0 {
			close(q.room)
			q.room = make(chan struct{})
		}
		left := q.n
		if sent < k {
			// Aborted: nothing more goes to the client.
			q.head, q.n = 0, 0
			clear(q.ring)
		}
		q.mu.Unlock()
		if sent < k {
			n := k - sent + left
			c.src.droppedAcks.Add(int64(n))
			c.log.Warn("pulsar acknowledgements still queued when the consumer closed are dropped (the client did not take them); the broker redelivers those messages",
				slog.String("consumer", c.name), slog.Int("dropped", n))
			return
		}
	}
}

// send hands ops to the client and returns how many it handed over before
// close aborted the queue.
func (c *consumer) send(ops []ackOp) int {
	var (
		errs, acks, nacks int
		firstErr          error
	)
	i := 0
	for ; i < len(ops); i++ {
		if c.acks.abort.Load() {
			break
		}
		op := &ops[i]
		if op.nack {
			c.c.Nack(op.m)
			nacks++
		} else {
			acks++
			if err := c.c.AckID(op.m.ID()); err != nil {
				errs++
				if firstErr == nil {
					firstErr = err
				}
			}
		}
		c.acks.sent.Add(1)
	}
	if acks > 0 {
		c.src.acked.Add(int64(acks))
	}
	if nacks > 0 {
		c.src.nacked.Add(int64(nacks))
	}
	if errs > 0 {
		c.log.Warn("pulsar acknowledgements failed; the broker redelivers those messages",
			slog.String("consumer", c.name), slog.Int("failed_acks", errs), slog.Any("error", c.src.clean(firstErr)))
	}
	return i
}

// stopAcks stops the ack goroutine before the consumer closes: no more
// operations are queued, and the goroutine hands what is queued to the
// client as long as it hands one over at least every ackDrainStall. Then
// (the client is waiting, for example for a reconnection) the rest is
// dropped, and the goroutine makes no call to the client after the one it
// is in, which the consumer's close ends. It reports whether the goroutine
// returned.
func (q *ackQueue) stopAcks() bool {
	q.mu.Lock()
	q.closing = true
	wake := q.idle
	q.mu.Unlock()
	if wake {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	t := time.NewTimer(ackDrainStall)
	defer t.Stop()
	last := q.sent.Load()
	for {
		select {
		case <-q.done:
			return true
		case <-t.C:
			if s := q.sent.Load(); s != last {
				last = s
				t.Reset(ackDrainStall)
				continue
			}
			q.abort.Store(true)
			return false
		}
	}
}
