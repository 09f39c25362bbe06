package pulsar

import (
	"bytes"
	"context"
	"log/slog"
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
