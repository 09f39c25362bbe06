package topology_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a closed in-memory reader returns ErrClosed from Receive and
// TryReceive even with letters queued, and those letters stay for the
// group's other readers.
func TestAClosedMemoryReaderLeavesTheQueuedLettersToTheOthers(t *testing.T) {
	_, q := declareMemory(t, build(t, topology.New("shared")))
	closed, _ := q.Subscribe(t.Context())
	other, _ := q.Subscribe(t.Context())
	defer other.Close(t.Context())
	if err := q.Publish(t.Context(), topology.Letter[int]{Value: 1}); err != nil {
		t.Fatal(err)
	}
	closed.Close(t.Context())
	buf := make([]topology.Letter[int], 4)
	if n, err := closed.Receive(t.Context(), buf); !errors.Is(err, topology.ErrClosed) {
		t.Errorf("Receive of a closed reader with a letter queued = %d, %v, want ErrClosed", n, err)
	}
	if n, err := closed.TryReceive(t.Context(), buf); !errors.Is(err, topology.ErrClosed) {
		t.Errorf("TryReceive of a closed reader with a letter queued = %d, %v, want ErrClosed", n, err)
	}
	if n, err := other.TryReceive(t.Context(), buf); n != 1 || err != nil || buf[0].Value != 1 {
		t.Errorf("the group's other reader received %d letters, %v, want letter 1", n, err)
	}
}

// Guarantee: a broadcast consumer's group goes with its reader: once the
// reader is closed, publishes no longer fill its queue, so a consumer
// gone never holds publishers up.
func TestAClosedBroadcastReaderNeverHoldsPublishersUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{Capacity: 1})
		defer m.Close(context.Background())
		q, err := m.Declare(t.Context(), build(t, topology.New("fanout").Broadcast()))
		if err != nil {
			t.Fatal(err)
		}
		gone, _ := q.Subscribe(t.Context())
		gone.Close(t.Context())
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		for v := range 3 {
			if err := q.Publish(ctx, topology.Letter[int]{Value: v}); err != nil {
				t.Fatalf("publish %d with no broadcast consumer left (Capacity 1) = %v, want nil", v, err)
			}
		}
	})
}

// Guarantee: Hold with an index that names no hold queue of the
// topology (negative, or past its last) fails with an error rather than
// panic.
func TestMemoryHoldIntoNoHoldQueueFails(t *testing.T) {
	_, q := declareMemory(t, build(t, topology.New("one-hold").Hold(time.Second)))
	for _, i := range []int{-1, 1} {
		if err := q.Hold(t.Context(), i, topology.Letter[int]{Value: i}); err == nil {
			t.Errorf("Hold into hold queue %d of 1 = nil, want an error", i)
		}
	}
}

// Guarantee: a publish into queues with room succeeds even with its
// context done: the context bounds only a wait for room.
func TestMemoryPublishWithRoomIgnoresADoneContext(t *testing.T) {
	m, q := declareMemory(t, build(t, topology.New("roomy")))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := q.Publish(ctx, topology.Letter[int]{Value: 1}); err != nil {
		t.Errorf("Publish with room and its context done = %v, want nil", err)
	}
	if n := m.Queued("roomy", "roomy"); n != 1 {
		t.Errorf("%d letters queued, want 1", n)
	}
}

// Guarantee: a Publisher's Publish that waits for room in a full queue
// returns, once its context ends, an error wrapping the context's error
// (context.DeadlineExceeded past its deadline, context.Canceled once
// cancelled), and publishes nothing.
func TestPublishWaitingForRoomReturnsTheErrorOfItsEndedContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{Capacity: 1})
		defer m.Close(context.Background())
		q, err := m.Declare(t.Context(), build(t, topology.New("full")))
		if err != nil {
			t.Fatal(err)
		}
		pub, err := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(t.Context(), 1); err != nil { // fills the queue
			t.Fatal(err)
		}
		expired, stop := context.WithTimeout(t.Context(), time.Second)
		defer stop()
		if err := pub.Publish(expired, 2); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Publish into a full queue past its deadline = %v, want an error wrapping context.DeadlineExceeded", err)
		}
		cancelled, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- pub.Publish(cancelled, 3) }()
		synctest.Wait() // it waits for room
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Publish into a full queue once cancelled = %v, want an error wrapping context.Canceled", err)
		}
		if n := m.Queued("full", "full"); n != 1 {
			t.Errorf("%d letters queued, want 1: the publishes cut short published nothing", n)
		}
	})
}
