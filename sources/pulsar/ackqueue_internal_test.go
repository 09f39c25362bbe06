package pulsar

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/acker"
)

// heldConsumer is a pulsar.Consumer whose AckID waits until the test
// releases it or the consumer closes, as pulsar-client-go's does while it
// reconnects the consumer (a close ends the reconnection).
type heldConsumer struct {
	pulsar.Consumer // the methods the source does not call

	release chan struct{}
	closing chan struct{}

	mu         sync.Mutex
	acked      int
	nacked     int
	closed     bool
	afterClose int // calls begun after Close
}

func newHeldConsumer() *heldConsumer {
	return &heldConsumer{release: make(chan struct{}), closing: make(chan struct{})}
}

func (h *heldConsumer) AckID(pulsar.MessageID) error {
	h.mu.Lock()
	if h.closed {
		h.afterClose++
	}
	h.mu.Unlock()
	select {
	case <-h.release:
	case <-h.closing:
	}
	h.mu.Lock()
	h.acked++
	h.mu.Unlock()
	return nil
}

func (h *heldConsumer) Nack(pulsar.Message) {
	h.mu.Lock()
	if h.closed {
		h.afterClose++
	}
	h.nacked++
	h.mu.Unlock()
}

func (h *heldConsumer) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	close(h.closing)
}

func (h *heldConsumer) counts() (acked, nacked, afterClose int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acked, h.nacked, h.afterClose
}

// heldMessage is a pulsar.Message with an id.
type heldMessage struct{ pulsar.Message }

func (heldMessage) ID() pulsar.MessageID { return nil }

// outcomes returns n outcomes of messages of a held consumer.
func outcomes(n int) []acker.Outcome {
	os := make([]acker.Outcome, n)
	for i := range os {
		os[i].Data = pulsar.Message(heldMessage{})
	}
	return os
}

// syncBuffer is a log destination safe for the ack goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), substr)
}

// heldSourceConsumer is a source's consumer of h with its ack goroutine
// running, logging to the returned buffer.
func heldSourceConsumer(h *heldConsumer) (*consumer, *syncBuffer) {
	logs := &syncBuffer{}
	c := &consumer{
		src:  &Source{},
		name: "held",
		c:    h,
		log:  slog.New(slog.NewTextHandler(logs, nil)),
		wake: make(chan struct{}, 1),
		acks: newAckQueue(),
	}
	go c.sendAcks()
	return c, logs
}

// Guarantee: while the client takes no acks, an Ack call finding the
// consumer's ack queue full returns after ackRoomWait, and later ones at
// once while it stays full; the outcomes that did not fit are counted in
// Stats().DroppedAcks and logged once; once the client takes acks again,
// everything queued reaches it before the consumer closes, and nothing
// after.
func TestAckReturnsWithinItsBoundWhileTheClientTakesNoAcks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldConsumer()
		c, logs := heldSourceConsumer(h)
		ctx := context.Background()

		c.Ack(ctx, outcomes(1), nil)
		synctest.Wait() // the ack goroutine waits in AckID
		began := time.Now()
		c.Ack(ctx, outcomes(ackQueueSize), nil)
		if d := time.Since(began); d > ackRoomWait {
			t.Errorf("Ack with the queue full returned after %v, want at most %v", d, ackRoomWait)
		}
		if got := c.src.droppedAcks.Load(); got != 1 {
			t.Errorf("DroppedAcks = %d after the queue filled up, want 1", got)
		}
		began = time.Now()
		c.Ack(ctx, outcomes(5), outcomes(5))
		if d := time.Since(began); d != 0 {
			t.Errorf("Ack with the queue still full returned after %v, want at once", d)
		}
		if got := c.src.droppedAcks.Load(); got != 11 {
			t.Errorf("DroppedAcks = %d, want 11", got)
		}
		if n := logs.count("ack queue is full"); n != 1 {
			t.Errorf("the full queue was logged %d times, want once:\n%s", n, logs.b.String())
		}

		close(h.release)
		synctest.Wait()
		c.Ack(ctx, outcomes(3), outcomes(2))
		c.close()
		acked, nacked, after := h.counts()
		if acked != ackQueueSize+3 || nacked != 2 || after != 0 {
			t.Errorf("client got %d acks and %d nacks, %d of them after its close; want %d and 2, none after",
				acked, nacked, after, ackQueueSize+3)
		}
		if got := c.src.droppedAcks.Load(); got != 11 {
			t.Errorf("DroppedAcks = %d after the close, want 11", got)
		}
	})
}

// Guarantee: closing a consumer whose client takes no acks gives the
// queued ones up after ackDrainStall without progress, closes the
// consumer (which ends the client's wait) and waits for the ack
// goroutine, which makes no call to the client after the close was asked
// for; the acks given up are counted in Stats().DroppedAcks and logged
// once, and later outcomes are dropped as a closed consumer's.
func TestCloseGivesUpAcksTheClientDoesNotTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldConsumer()
		c, logs := heldSourceConsumer(h)
		ctx := context.Background()

		c.Ack(ctx, outcomes(50), nil)
		synctest.Wait()
		began := time.Now()
		c.close()
		if d := time.Since(began); d > ackDrainStall {
			t.Errorf("close took %v, want at most %v", d, ackDrainStall)
		}
		acked, _, after := h.counts()
		if acked != 1 || after != 0 {
			t.Errorf("client got %d acks, %d after its close; want the one it held, none after", acked, after)
		}
		if got := c.src.droppedAcks.Load(); got != 49 {
			t.Errorf("DroppedAcks = %d, want 49", got)
		}
		if n := logs.count("still queued when the consumer closed"); n != 1 {
			t.Errorf("the acks given up were logged %d times, want once:\n%s", n, logs.b.String())
		}
		c.Ack(ctx, outcomes(2), nil)
		if got := c.src.droppedAcks.Load(); got != 51 {
			t.Errorf("DroppedAcks = %d after an Ack on the closed consumer, want 51", got)
		}
	})
}

// seqID is a message id that carries the message's place in a test's
// sequence.
type seqID struct {
	pulsar.MessageID
	n int
}

// seqMessage is a pulsar.Message whose id is its place in a sequence.
type seqMessage struct {
	pulsar.Message
	n int
}

func (m seqMessage) ID() pulsar.MessageID { return seqID{n: m.n} }

// tricklingConsumer is a pulsar.Consumer whose client takes one ack or
// nack per token the test gives it, and records which message each was
// for, in order.
type tricklingConsumer struct {
	pulsar.Consumer // the methods the source does not call

	tokens chan struct{}

	mu  sync.Mutex
	got []string // "ack 3", "nack 4", in the order the client took them
}

func (t *tricklingConsumer) take(what string, id pulsar.MessageID) {
	<-t.tokens
	t.mu.Lock()
	t.got = append(t.got, what+" "+strconv.Itoa(id.(seqID).n))
	t.mu.Unlock()
}

func (t *tricklingConsumer) AckID(id pulsar.MessageID) error { t.take("ack", id); return nil }

func (t *tricklingConsumer) Nack(m pulsar.Message) { t.take("nack", m.ID()) }

func (t *tricklingConsumer) Close() {}

func (t *tricklingConsumer) give(n int) {
	for range n {
		t.tokens <- struct{}{}
	}
}

// taken is what the client took so far, in order.
func (t *tricklingConsumer) taken() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.got)
}

// tricklingSourceConsumer is a source's consumer of a trickling client
// that buffers up to tokens tokens, with its ack goroutine running,
// logging to the returned buffer.
func tricklingSourceConsumer(tokens int) (*consumer, *tricklingConsumer, *syncBuffer) {
	tc := &tricklingConsumer{tokens: make(chan struct{}, tokens)}
	logs := &syncBuffer{}
	c := &consumer{src: &Source{}, name: "trickling", c: tc, log: slog.New(slog.NewTextHandler(logs, nil)),
		wake: make(chan struct{}, 1), acks: newAckQueue()}
	go c.sendAcks()
	return c, tc, logs
}

// Guarantee: every outcome queued for the client reaches it once, in the
// order the Ack calls queued it, as its ack or its nack, also when the
// queue wraps around while it holds more than the ring's tail: the
// outcomes of a slow client are neither lost nor handed over twice.
func TestQueuedOutcomesReachTheClientOnceInOrderAcrossTheQueuesWrap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, tc, _ := tricklingSourceConsumer(2 * ackQueueSize)
		ctx := context.Background()

		var want []string
		next := 0
		// ack queues n outcomes, every third one a failure, of which one in
		// two is discarded (acked), the others retried (nacked).
		ack := func(n int) {
			var successful, failed []acker.Outcome
			for range n {
				o := acker.Outcome{Data: pulsar.Message(seqMessage{n: next})}
				switch next % 6 {
				case 2:
					failed = append(failed, o)
				case 5:
					o.Disposition = acker.DispositionDiscard
					failed = append(failed, o)
				default:
					successful = append(successful, o)
				}
				next++
			}
			// The client takes the successful ones first, then the failed.
			for _, o := range successful {
				want = append(want, "ack "+strconv.Itoa(o.Data.(seqMessage).n))
			}
			for _, o := range failed {
				what := "nack "
				if o.Disposition == acker.DispositionDiscard {
					what = "ack "
				}
				want = append(want, what+strconv.Itoa(o.Data.(seqMessage).n))
			}
			c.Ack(ctx, successful, failed)
			synctest.Wait()
		}
		// One outcome in the client's hands, the queue full behind it.
		ack(1)
		ack(ackQueueSize - 1)
		// The client takes the first and one chunk: the queue has room for
		// one chunk, which goes at the start of the ring while the ring's
		// tail is still queued.
		tc.give(1 + ackChunk)
		synctest.Wait()
		ack(ackChunk)
		tc.give(ackQueueSize)
		synctest.Wait()
		c.close()

		got := tc.taken()
		if !slices.Equal(got, want) {
			t.Errorf("the client took %d outcomes, want %d once each in order", len(got), len(want))
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("first difference at %d: got %q, want %q", i, got[i], want[i])
				}
			}
		}
		if n := c.src.droppedAcks.Load(); n != 0 {
			t.Errorf("DroppedAcks = %d, want 0", n)
		}
	})
}

// Guarantee: once the client takes acks again after the ack queue stayed
// full (outcomes were dropped), a later full queue is a new event: an Ack
// call finding it full waits for the room the client makes and drops
// nothing, and a second stall is logged again.
func TestAFullAckQueueWaitsForRoomAgainAfterAStallEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, tc, logs := tricklingSourceConsumer(4 * ackQueueSize)
		ctx := context.Background()
		seq := 0
		ack := func(n int) {
			os := make([]acker.Outcome, n)
			for i := range os {
				os[i].Data = pulsar.Message(seqMessage{n: seq})
				seq++
			}
			c.Ack(ctx, os, nil)
		}
		stall := func() {
			ack(1)
			synctest.Wait() // the client holds the first
			ack(ackQueueSize)
		}

		stall() // the last outcome does not fit and is dropped
		if got := c.src.droppedAcks.Load(); got != 1 {
			t.Fatalf("DroppedAcks = %d after the first stall, want 1", got)
		}
		// While the queue stays full, outcomes are dropped at once; one the
		// shutdown interrupted is neither acked nor nacked anyway, and is
		// not counted.
		c.Ack(ctx, outcomes(2), []acker.Outcome{
			{Data: pulsar.Message(heldMessage{}), Err: acker.ErrShutdown},
			{Data: pulsar.Message(heldMessage{}), Err: errors.New("failed")},
		})
		if got := c.src.droppedAcks.Load(); got != 4 {
			t.Errorf("DroppedAcks = %d after three more outcomes and an interrupted one, want 4", got)
		}
		tc.give(ackQueueSize)
		synctest.Wait() // the client took everything queued: the stall ended

		ack(1)
		synctest.Wait()
		ack(ackQueueSize - 1) // the queue is full again
		done := make(chan struct{})
		go func() {
			defer close(done)
			ack(10)
		}()
		synctest.Wait() // the Ack call waits for room
		tc.give(1 + ackChunk)
		<-done
		if got := c.src.droppedAcks.Load(); got != 4 {
			t.Errorf("DroppedAcks = %d after an Ack that found room within ackRoomWait, want still 4", got)
		}

		tc.give(ackQueueSize + 10 - (1 + ackChunk)) // the rest of what was queued
		synctest.Wait()
		stall()
		if got := c.src.droppedAcks.Load(); got != 5 {
			t.Errorf("DroppedAcks = %d after the second stall, want 5", got)
		}
		if n := logs.count("ack queue is full"); n != 2 {
			t.Errorf("two stalls were logged %d times, want twice:\n%s", n, logs.b.String())
		}
		tc.give(2 * ackQueueSize)
		c.close()
	})
}

// Guarantee: closing a consumer hands the client every queued outcome as
// long as it keeps taking them, however long that takes in all: close
// gives up only after ackDrainStall without progress, and closes the
// consumer after the last one.
func TestCloseHandsOverTheQueuedOutcomesWhileTheClientKeepsTakingThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const queued = 20
		c, tc, _ := tricklingSourceConsumer(queued)
		os := make([]acker.Outcome, queued)
		for i := range os {
			os[i].Data = pulsar.Message(seqMessage{n: i})
		}
		c.Ack(context.Background(), os, nil)
		// The client takes one ack every ackDrainStall/2: slow, but
		// never stalled (and the tokens are buffered, so that one the
		// client does not take holds nothing up).
		go func() {
			for range queued {
				time.Sleep(ackDrainStall / 2)
				tc.give(1)
			}
		}()
		c.close()
		if got := len(tc.taken()); got != queued {
			t.Errorf("the client took %d of the %d queued acks before the consumer closed", got, queued)
		}
		if n := c.src.droppedAcks.Load(); n != 0 {
			t.Errorf("DroppedAcks = %d, want 0", n)
		}
	})
}

// Guarantee: outcomes for a consumer the source replaced or closed (its
// stage failed, or the source closed) are dropped, never queued for the
// client, and each one the broker will redeliver is counted in
// Stats().DroppedAcks (failed ones too; one the shutdown interrupted is
// neither acked nor nacked anyway, and is not counted).
func TestOutcomesForAReplacedConsumerAreDroppedAndCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldConsumer()
		c, logs := heldSourceConsumer(h)
		// As retire marks the consumers of a failed stage, before it
		// closes them.
		c.gone.Store(true)
		c.Ack(context.Background(), outcomes(3), []acker.Outcome{
			{Data: pulsar.Message(heldMessage{}), Err: errors.New("failed")},
			{Data: pulsar.Message(heldMessage{}), Err: errors.New("failed"), Disposition: acker.DispositionDiscard},
			{Data: pulsar.Message(heldMessage{}), Err: acker.ErrShutdown},
		})
		synctest.Wait()
		c.acks.mu.Lock()
		queued := c.acks.n
		c.acks.mu.Unlock()
		if queued != 0 {
			t.Errorf("%d outcomes of a replaced consumer were queued for its client", queued)
		}
		if got := c.src.droppedAcks.Load(); got != 5 {
			t.Errorf("DroppedAcks = %d, want 5 (3 successful, 2 failed)", got)
		}
		if n := logs.count("closed or replaced consumer"); n != 1 {
			t.Errorf("the dropped outcomes were logged %d times, want once", n)
		}
		close(h.release)
		c.close()
		if acked, nacked, _ := h.counts(); acked+nacked != 0 {
			t.Errorf("the client got %d acks and %d nacks for a replaced consumer, want none", acked, nacked)
		}
	})
}

// Guarantee: closing a consumer whose client takes no acks counts every
// ack it gives up in Stats().DroppedAcks, those queued behind the chunk
// the ack goroutine was handing over included.
func TestCloseCountsEveryAckItGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldConsumer()
		c, _ := heldSourceConsumer(h)
		ctx := context.Background()
		c.Ack(ctx, outcomes(1), nil)
		synctest.Wait() // the client holds the first
		const behind = ackChunk + 50
		c.Ack(ctx, outcomes(behind), nil)
		c.close()
		acked, _, after := h.counts()
		if got := c.src.droppedAcks.Load(); acked != 1 || after != 0 || got != behind {
			t.Errorf("client got %d acks (%d after its close), DroppedAcks = %d; want the one it held, none after, %d dropped",
				acked, after, got, behind)
		}
	})
}

// Guarantee: an Ack call waiting for room in a full ack queue returns when
// its context ends, before ackRoomWait, and counts the outcomes that did
// not fit as dropped.
func TestAnAckWaitingForRoomReturnsWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldConsumer()
		c, _ := heldSourceConsumer(h)
		c.Ack(context.Background(), outcomes(1), nil)
		synctest.Wait() // the ack goroutine waits in AckID

		const wait = ackRoomWait / 10
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		began := time.Now()
		c.Ack(ctx, outcomes(ackQueueSize), nil)
		if d := time.Since(began); d != wait {
			t.Errorf("Ack with the queue full returned after %v, want when its context ended (%v)", d, wait)
		}
		if got := c.src.droppedAcks.Load(); got != 1 {
			t.Errorf("DroppedAcks = %d, want 1", got)
		}
		close(h.release)
		c.close()
	})
}
