package pulsartopic

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a Receive takes every message its consumer already holds, up
// to the room it is given, and returns with them without waiting for more.
func TestAReceiveTakesEveryReadyMessageUpToItsRoom(t *testing.T) {
	const n = 5
	ctx, b, be, _, s := heldOnBroker(t, n)
	want := 0
	for _, room := range []int{3, 10} {
		dst := make([]topic.Envelope[int], room)
		k, err := s.Receive(ctx, dst)
		if err != nil || k != min(room, n-want) {
			t.Fatalf("Receive with room for %d, %d of %d messages taken before = %d, %v; want %d", room, want, n, k, err, min(room, n-want))
		}
		for _, e := range dst[:k] {
			if e.Value != want {
				t.Fatalf("Receive handed out %d, want %d", e.Value, want)
			}
			want++
			if err := s.Settle(e.ID, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	wait.Within(t, 20*time.Second, "every message acked", func() bool { return b.Backlog(be.TopicName("t"), "g") == 0 })
}

// gateCodec is topic.IntCodec whose first Decode waits, once it has
// started (entered), until release is closed.
type gateCodec struct {
	once             *sync.Once
	entered, release chan struct{}
}

func (gateCodec) Encode(v int) ([]byte, error) { return topic.IntCodec{}.Encode(v) }

func (c gateCodec) Decode(p []byte) (int, error) {
	c.once.Do(func() {
		close(c.entered)
		<-c.release
	})
	return topic.IntCodec{}.Decode(p)
}

// Guarantee: a message a Receive takes while its subscription closes is
// not handed out (the subscription could no longer settle it): Receive
// returns ErrSubscriptionClosed, and the group's next member receives the
// message.
func TestAMessageTakenWhileTheSubscriptionClosesGoesToTheNextMember(t *testing.T) {
	codec := gateCodec{once: new(sync.Once), entered: make(chan struct{}), release: make(chan struct{})}
	_, _, st, ss := balancedOnBroker(t, codec, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := st.Publish(ctx, topic.Envelope[int]{Value: 7}, topic.Block); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	got := make(chan result, 1)
	go func() {
		n, err := ss.Receive(ctx, make([]topic.Envelope[int], 1))
		got <- result{n, err}
	}()
	<-codec.entered
	ss.Close()
	close(codec.release)
	if r := <-got; r.n != 0 || !errors.Is(r.err, topic.ErrSubscriptionClosed) {
		t.Fatalf("a Receive decoding while its subscription closed = %d, %v; want 0, ErrSubscriptionClosed", r.n, r.err)
	}
	next, err := st.Subscribe(ctx, topic.Balanced("g"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	dst := make([]topic.Envelope[int], 1)
	if n, err := next.Receive(ctx, dst); err != nil || n != 1 || dst[0].Value != 7 {
		t.Fatalf("the next member's Receive = %d %+v, %v; want 7", n, dst[0], err)
	}
	if err := next.Settle(dst[0].ID, nil); err != nil {
		t.Fatal(err)
	}
}

// Guarantee: the backend forgets a closed topic, so that a process that
// declares and closes topics does not hold them all: at once when no
// subscription of it is open, or once its last subscription has left.
func TestTheBackendForgetsAClosedTopic(t *testing.T) {
	_, be, st, ss := balancedOnBroker(t, topic.IntCodec{}, 50*time.Millisecond)
	open := func() int {
		be.mu.Lock()
		defer be.mu.Unlock()
		return len(be.topics)
	}
	bare, err := be.NewTopic(context.Background(), "bare", topic.Options{}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if n := open(); n != 2 {
		t.Fatalf("the backend holds %d topics, want 2", n)
	}
	bare.Close()
	if n := open(); n != 1 {
		t.Fatalf("after closing a topic with no subscription, the backend holds %d topics, want 1", n)
	}
	st.Close()
	if n := open(); n != 1 {
		t.Fatalf("after closing a topic whose subscription is open, the backend holds %d topics, want 1", n)
	}
	ss.Close()
	if n := open(); n != 0 {
		t.Fatalf("after its last subscription left, the backend holds %d topics, want 0", n)
	}
}

// Guarantee: once its topic is closed, a subscription still hands out the
// messages its consumer already holds, then returns ErrSubscriptionClosed
// without waiting.
func TestAfterItsTopicClosedASubscriptionHandsOutWhatItHolds(t *testing.T) {
	const n = 3
	ctx, _, _, st, s := heldOnBroker(t, n)
	st.Close()
	dst := make([]topic.Envelope[int], 10)
	if k, err := s.Receive(ctx, dst); err != nil || k != n {
		t.Fatalf("Receive after the topic closed = %d, %v; want the %d messages held", k, err, n)
	}
	if k, err := s.Receive(ctx, dst); k != 0 || !errors.Is(err, topic.ErrSubscriptionClosed) {
		t.Fatalf("Receive once the held messages are out = %d, %v; want ErrSubscriptionClosed", k, err)
	}
}

// heldOnBroker makes a balanced subscription on a broker, publishes the
// values 0 to n-1 to its topic and waits until the subscription's consumer
// holds them all, none received yet. ctx bounds the test's calls.
func heldOnBroker(t *testing.T, n int) (ctx context.Context, b *pulsartest.Broker, be *Backend[int], st topic.State[int], s *pSub[int]) {
	t.Helper()
	b, be, st, ss := balancedOnBroker(t, topic.IntCodec{}, 50*time.Millisecond)
	s = ss.(*pSub[int])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	for i := range n {
		if _, err := st.Publish(ctx, topic.Envelope[int]{Value: i}, topic.Block); err != nil {
			t.Fatal(err)
		}
	}
	wait.Within(t, 20*time.Second, "every message in the consumer's channel", func() bool { return len(s.ch) == n })
	return ctx, b, be, st, s
}
