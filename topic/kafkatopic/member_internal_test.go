package kafkatopic

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
	"github.com/boulevard-go/boulevard/internal/kafkareach"
	"github.com/boulevard-go/boulevard/topic"
)

// session is a group session whose marks and commits go nowhere.
type session struct{}

func (session) MarkOffset(string, int32, int64, string) {}
func (session) Commit()                                 {}

// newMember returns a balanced member, with no client, whose read-ahead
// is capacity records, nacked messages wait nackDelay and revokes wait
// revokeTimeout.
func newMember(capacity int, nackDelay, revokeTimeout time.Duration) *member[int] {
	b := &Backend[int]{opts: Options[int]{NackRedeliveryDelay: nackDelay, RevokeTimeout: revokeTimeout}, log: slog.New(slog.DiscardHandler)}
	t := &kTopic[int]{b: b, kname: "t", opts: topic.Options{Balanced: topic.BalancedPolicy{Capacity: capacity}}}
	m := &member[int]{t: t, gid: "t:g", reach: &kafkareach.Reach{},
		outstanding: make(map[topic.MessageID]delivery[int]), fetchFrom: make(map[int32]int64),
		stopped: make(chan struct{}), dataSig: make(chan struct{}, 1)}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m
}

// Guarantee: a message nacked while the revoke of its partition waits for
// it is not queued again once its delay has passed; so it does not hold
// the member's read-ahead, and the partition's next claim queues its
// records and the member receives them.
func TestAMessageNackedDuringItsRevokeLeavesTheReadAheadToTheNextClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMember(1, time.Millisecond, time.Minute)
		defer m.cancel()
		defer close(m.stopped) // a push still waiting gives up
		ctx := t.Context()
		old := kafkaoffset.New(session{}, "t", 0)
		if !m.push(ctx, old, []delivery[int]{{c: old, off: 0, v: 1}}) {
			t.Fatal("push to an empty read-ahead failed")
		}
		dst := make([]topic.Envelope[int], 1)
		if n, err := m.Receive(ctx, dst); n != 1 || err != nil {
			t.Fatalf("Receive = %d, %v", n, err)
		}
		released := make(chan struct{})
		go func() {
			m.release(old)
			close(released)
		}()
		synctest.Wait() // the revoke waits for the message held
		if err := m.Settle(dst[0].ID, errors.New("handler failed")); err != nil {
			t.Fatalf("Nack while its partition is revoked: %v", err)
		}
		<-released
		time.Sleep(2 * time.Millisecond) // the nack's delay passes
		next := kafkaoffset.New(session{}, "t", 0)
		pushed := make(chan bool, 1)
		go func() {
			pushed <- m.push(ctx, next, []delivery[int]{{c: next, off: 0, v: 1}, {c: next, off: 1, v: 2}})
		}()
		synctest.Wait()
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		for want := 1; want <= 2; want++ {
			n, err := m.Receive(rctx, dst)
			if n != 1 || err != nil || dst[0].Value != want {
				t.Fatalf("Receive = %d, %v (value %d), want %d of the next claim", n, err, dst[0].Value, want)
			}
			if err := m.Settle(dst[0].ID, nil); err != nil {
				t.Fatalf("Ack(%d): %v", want, err)
			}
		}
		if !<-pushed {
			t.Fatal("the next claim's push gave up")
		}
	})
}

// Guarantee: each nacked message is received again NackRedeliveryDelay
// after its own nack: one nacked while another waits does not come back
// with it.
func TestEachNackedMessageWaitsItsOwnDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = time.Second
		m := newMember(8, delay, time.Minute)
		defer m.cancel()
		ctx := t.Context()
		c := kafkaoffset.New(session{}, "t", 0)
		if !m.push(ctx, c, []delivery[int]{{c: c, off: 0, v: 1}, {c: c, off: 1, v: 2}}) {
			t.Fatal("push to an empty read-ahead failed")
		}
		dst := make([]topic.Envelope[int], 2)
		if n, err := m.Receive(ctx, dst); n != 2 || err != nil {
			t.Fatalf("Receive = %d, %v", n, err)
		}
		start := time.Now()
		nack := errors.New("handler failed")
		if err := m.Settle(dst[0].ID, nack); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay / 2)
		if err := m.Settle(dst[1].ID, nack); err != nil {
			t.Fatal(err)
		}
		for _, want := range []struct {
			v  int
			at time.Duration
		}{{1, delay}, {2, delay + delay/2}} {
			n, err := m.Receive(ctx, dst[:1])
			if n != 1 || err != nil || dst[0].Value != want.v || time.Since(start) != want.at {
				t.Fatalf("Receive = %d, %v: %d at %v, want %d again at %v", n, err, dst[0].Value, time.Since(start), want.v, want.at)
			}
		}
	})
}

// Guarantee: while the revoke of a partition waits for the messages the
// subscriber holds, the member hands out nothing more of it: neither the
// records it had fetched and not handed out nor a message nacked before
// the revoke whose delay passes meanwhile (the next owner delivers both).
func TestARevokeHandsOutNothingMoreOfThePartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = time.Second
		m := newMember(8, delay, time.Minute)
		defer m.cancel()
		ctx := t.Context()
		c := kafkaoffset.New(session{}, "t", 0)
		if !m.push(ctx, c, []delivery[int]{{c: c, off: 0, v: 1}, {c: c, off: 1, v: 2}, {c: c, off: 2, v: 3}}) {
			t.Fatal("push to an empty read-ahead failed")
		}
		dst := make([]topic.Envelope[int], 2)
		if n, err := m.Receive(ctx, dst); n != 2 || err != nil {
			t.Fatalf("Receive = %d, %v", n, err)
		}
		if err := m.Settle(dst[0].ID, errors.New("handler failed")); err != nil {
			t.Fatal(err)
		}
		released := make(chan struct{})
		go func() {
			m.release(c)
			close(released)
		}()
		synctest.Wait() // the revoke waits for 2
		rctx, cancel := context.WithTimeout(ctx, 2*delay)
		defer cancel()
		got := make([]topic.Envelope[int], 1)
		if n, err := m.Receive(rctx, got); n != 0 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Receive while the revoke waits = %d, %v (value %d), want nothing", n, err, got[0].Value)
		}
		if err := m.Settle(dst[1].ID, nil); err != nil {
			t.Fatal(err)
		}
		<-released
	})
}

// Guarantee: a broadcast subscriber queues at most broadcast.queue_capacity
// records it has not handed out: the next waits until a Receive makes
// room.
func TestABroadcastSubscriberQueuesAtMostItsCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const capacity = 2
		s := &bsub[int]{t: &kTopic[int]{opts: topic.Options{Broadcast: topic.BroadcastPolicy{Capacity: capacity}}},
			stopCh: make(chan struct{}), dataSig: make(chan struct{}, 1)}
		defer close(s.stopCh)
		for v := range capacity {
			if !s.push(bitem[int]{v: v}) {
				t.Fatalf("push %d of %d failed", v+1, capacity)
			}
		}
		pushed := make(chan bool, 1)
		go func() { pushed <- s.push(bitem[int]{v: capacity}) }()
		synctest.Wait()
		select {
		case <-pushed:
			t.Fatalf("a record past the capacity of %d was queued", capacity)
		default:
		}
		dst := make([]topic.Envelope[int], 1)
		if n, err := s.Receive(t.Context(), dst); n != 1 || err != nil {
			t.Fatalf("Receive = %d, %v", n, err)
		}
		if !<-pushed {
			t.Fatal("the push waiting for room gave up once there was room")
		}
	})
}
