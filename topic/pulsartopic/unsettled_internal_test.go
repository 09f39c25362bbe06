package pulsartopic

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a broadcast subscriber that never settles what it receives
// (as it need not on the other backends) keeps no more than
// UnsettledPerSlot times its read-ahead of those messages, and never less
// than MinUnsettled.
func TestABroadcastSubscriberKeepsUnsettledMessagesUpToItsLimit(t *testing.T) {
	for _, tc := range []struct{ capacity, want int }{
		{1, MinUnsettled},
		{topic.DefaultBroadcastCapacity, UnsettledPerSlot * topic.DefaultBroadcastCapacity},
		{topic.MaxCapacity, UnsettledPerSlot * topic.MaxCapacity},
	} {
		if got := unsettledLimit(tc.capacity); got != tc.want {
			t.Errorf("a broadcast subscriber with a read-ahead of %d keeps %d unsettled messages, want %d", tc.capacity, got, tc.want)
		}
	}
	_, _, _, ss := subscribedOnBroker(t, topic.IntCodec{}, time.Second,
		topic.Options{Mode: topic.BroadcastOnly, Broadcast: topic.BroadcastPolicy{Capacity: 2}}, topic.Broadcast())
	if got := ss.(*pSub[int]).unsettledMax; got != unsettledLimit(2) {
		t.Errorf("a broadcast subscription with a read-ahead of 2 keeps %d unsettled messages, want %d", got, unsettledLimit(2))
	}
}

// Guarantee: a balanced subscriber forgets none of the messages it left
// unsettled, however many: its broker bounds them, and acking one it has
// not settled would lose it for the whole group.
func TestABalancedSubscriberKeepsEveryUnsettledMessage(t *testing.T) {
	_, _, _, ss := balancedOnBroker(t, topic.IntCodec{}, time.Second)
	if got := ss.(*pSub[int]).unsettledMax; got != 0 {
		t.Errorf("a balanced subscription forgets its unsettled messages past %d, want it to forget none (0)", got)
	}
}

// Guarantee: past its limit, a broadcast subscriber keeps exactly the
// latest half of its limit of the messages it left unsettled.
func TestABroadcastSubscriberPastItsLimitKeepsTheLatestHalf(t *testing.T) {
	const limit = 32
	s := &pSub[int]{unsettledMax: limit, pending: map[topic.MessageID]pulsar.MessageID{}}
	for range limit + 1 {
		s.next++
		s.pending[s.next] = pulsar.EarliestMessageID()
	}
	s.forgetOldestLocked()
	if len(s.pending) != limit/2 {
		t.Fatalf("past a limit of %d, the subscription keeps %d unsettled messages, want %d", limit, len(s.pending), limit/2)
	}
	for id := s.next - limit/2 + 1; id <= s.next; id++ {
		if _, ok := s.pending[id]; !ok {
			t.Errorf("message %d, among the latest %d, was forgotten", id, limit/2)
		}
	}
}

// Guarantee: past its limit, a broadcast subscriber that never settles
// forgets the older half of what it left unsettled: those are acked on
// the broker (their Settle returns ErrMessageNotTracked), the latest can
// still be settled.
func TestABroadcastSubscriberThatNeverSettlesKeepsABoundedNumberOfMessages(t *testing.T) {
	const capacity, msgs, limit = 2, 200, 32
	b, be, st, ss := subscribedOnBroker(t, topic.IntCodec{}, time.Second,
		topic.Options{Mode: topic.BroadcastOnly, Broadcast: topic.BroadcastPolicy{Capacity: capacity}}, topic.Broadcast())
	s := ss.(*pSub[int])
	s.unsettledMax = limit // MinUnsettled would take 65536 messages
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := range msgs {
		if _, err := st.Publish(ctx, topic.Envelope[int]{Value: i}, topic.Block); err != nil {
			t.Fatal(err)
		}
	}
	var first, last topic.MessageID
	dst := make([]topic.Envelope[int], capacity)
	for got := 0; got < msgs; {
		n, err := s.Receive(ctx, dst)
		if err != nil {
			t.Fatalf("Receive after %d of %d messages: %v", got, msgs, err)
		}
		if got == 0 {
			first = dst[0].ID
		}
		got += n
		last = dst[n-1].ID
	}
	s.mu.Lock()
	kept := len(s.pending)
	s.mu.Unlock()
	if kept > limit {
		t.Fatalf("after receiving %d messages and settling none, the subscription keeps %d, want at most %d", msgs, kept, limit)
	}
	wait.Within(t, 20*time.Second, "the forgotten messages acked on the broker", func() bool {
		n := b.Backlog(be.TopicName("t"), s.name)
		return n >= 0 && n <= int64(kept)
	})
	if err := s.Settle(first, nil); !errors.Is(err, topic.ErrMessageNotTracked) {
		t.Errorf("Settle of the first message, forgotten = %v, want ErrMessageNotTracked", err)
	}
	if err := s.Settle(last, nil); err != nil {
		t.Errorf("Settle of the latest message = %v, want nil", err)
	}
}
