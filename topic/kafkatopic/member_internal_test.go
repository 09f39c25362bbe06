package kafkatopic

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
	"github.com/boulevard-go/boulevard/internal/kafkareach"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/hookcall"
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

// Guarantee: a broadcast subscriber that is always behind (its
// read-ahead never empties) keeps a read-ahead the size of what it holds,
// not of every record it ever received.
func TestABroadcastSubscriberAlwaysBehindKeepsABoundedReadAhead(t *testing.T) {
	s := &bsub[int]{t: &kTopic[int]{opts: topic.Options{Broadcast: topic.BroadcastPolicy{Capacity: 4}}},
		stopCh: make(chan struct{}), dataSig: make(chan struct{}, 1)}
	defer close(s.stopCh)
	receiveOneBehind(t, func(v int) bool { return s.push(bitem[int]{v: v}) }, s.Receive, func() (int, int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.queue) - s.head, cap(s.queue)
	})
}

// Guarantee: so does a balanced member always behind.
func TestABalancedMemberAlwaysBehindKeepsABoundedReadAhead(t *testing.T) {
	m := newMember(4, time.Millisecond, time.Minute)
	defer m.cancel()
	c := kafkaoffset.New(session{}, "t", 0)
	receiveOneBehind(t, func(v int) bool { return m.push(t.Context(), c, []delivery[int]{{c: c, off: int64(v), v: v}}) }, m.Receive, func() (int, int) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.queue) - m.head, cap(m.queue)
	})
}

// receiveOneBehind pushes 100,000 records, receiving each but the last
// one pushed, so that the read-ahead never empties, and fails t unless
// it then holds that one record (size returns how many records it holds
// and the capacity of its slice) in a slice of at most 4 queueCompactAt.
func receiveOneBehind(t *testing.T, push func(v int) bool, receive func(context.Context, []topic.Envelope[int]) (int, error), size func() (held, capacity int)) {
	t.Helper()
	const records = 100_000
	dst := make([]topic.Envelope[int], 1)
	for v := range records {
		if !push(v) {
			t.Fatalf("push %d failed", v)
		}
		if v == 0 {
			continue // one record stays queued: the read-ahead never empties
		}
		if n, err := receive(t.Context(), dst); n != 1 || err != nil || dst[0].Value != v-1 {
			t.Fatalf("Receive = %d %+v, %v; want record %d", n, dst[0], err, v-1)
		}
	}
	if held, capacity := size(); held != 1 || capacity > 4*queueCompactAt {
		t.Fatalf("after %d records received one behind, the read-ahead holds %d in a slice of %d, want 1 in at most %d", records, held, capacity, 4*queueCompactAt)
	}
}

// receiveAll pushes the records vs of claim c to m and receives them all.
func receiveAll(t *testing.T, m *member[int], c *kafkaoffset.Claim, vs ...int) []topic.Envelope[int] {
	t.Helper()
	batch := make([]delivery[int], len(vs))
	for i, v := range vs {
		batch[i] = delivery[int]{c: c, off: int64(i), v: v}
	}
	if !m.push(t.Context(), c, batch) {
		t.Fatal("push to the read-ahead failed")
	}
	dst := make([]topic.Envelope[int], len(vs))
	if n, err := m.Receive(t.Context(), dst); n != len(vs) || err != nil {
		t.Fatalf("Receive = %d, %v, want %d", n, err, len(vs))
	}
	return dst
}

// Guarantee: a revoke waits for the messages of the partition the
// subscriber holds only until each is settled, acked or nacked: the
// partition is let go as soon as the last one is, not when RevokeTimeout
// runs out.
func TestARevokeEndsAsSoonAsEveryHeldMessageIsSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMember(8, time.Second, time.Minute)
		defer m.cancel()
		c := kafkaoffset.New(session{}, "t", 0)
		got := receiveAll(t, m, c, 1, 2, 3)
		if err := m.Settle(got[0].ID, nil); err != nil {
			t.Fatal(err)
		}
		released := make(chan struct{})
		go func() {
			m.release(c)
			close(released)
		}()
		synctest.Wait() // the revoke waits for 2 and 3
		start := time.Now()
		if err := m.Settle(got[1].ID, nil); err != nil {
			t.Fatalf("Ack during the revoke: %v", err)
		}
		if err := m.Settle(got[2].ID, errors.New("handler failed")); err != nil {
			t.Fatalf("Nack during the revoke: %v", err)
		}
		<-released
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the revoke let the partition go %v after its last held message was settled, want at once", waited)
		}
	})
}

// Guarantee: a revoke calls the subscriber's OnRelease only while the
// subscriber holds messages of the partition, and never while the
// subscription is closing; done is called once the wait is over.
func TestOnReleaseIsCalledOnlyWhileMessagesOfThePartitionAreHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMember(8, time.Second, time.Minute)
		defer m.cancel()
		calls, dones := 0, 0
		m.onRelease = func() func() {
			calls++
			return func() { dones++ }
		}
		// Fetched, none handed out.
		idle := kafkaoffset.New(session{}, "t", 0)
		if !m.push(t.Context(), idle, []delivery[int]{{c: idle, off: 0, v: 1}}) {
			t.Fatal("push to an empty read-ahead failed")
		}
		m.release(idle)
		if calls != 0 {
			t.Fatalf("OnRelease called %d time(s) for a partition of which nothing is held", calls)
		}
		held := kafkaoffset.New(session{}, "t", 1)
		got := receiveAll(t, m, held, 2)
		released := make(chan struct{})
		go func() {
			m.release(held)
			close(released)
		}()
		synctest.Wait()
		if calls != 1 || dones != 0 {
			t.Fatalf("while the revoke waits: OnRelease called %d time(s), done %d, want 1 and 0", calls, dones)
		}
		if err := m.Settle(got[0].ID, nil); err != nil {
			t.Fatal(err)
		}
		<-released
		if dones != 1 {
			t.Fatalf("done called %d time(s) once the revoke was over, want 1", dones)
		}
		closing := kafkaoffset.New(session{}, "t", 2)
		receiveAll(t, m, closing, 3)
		m.mu.Lock()
		m.ended = true // as teardown leaves it
		close(m.stopped)
		m.mu.Unlock()
		m.release(closing)
		if calls != 1 {
			t.Fatalf("OnRelease called %d time(s) in all, want 1: called while the subscription was closing", calls)
		}
	})
}

// newBroadcast returns a broadcast subscriber, with no client, whose
// read-ahead is capacity records and whose clients count as closed
// already.
func newBroadcast(capacity int, onLag topic.OnLag) *bsub[int] {
	b := &Backend[int]{log: slog.New(slog.DiscardHandler)}
	t := &kTopic[int]{b: b, kname: "t", opts: topic.Options{Broadcast: topic.BroadcastPolicy{Capacity: capacity, OnLag: onLag}},
		broadcasts: make(map[*bsub[int]]struct{})}
	s := &bsub[int]{t: t, stopCh: make(chan struct{}), dataSig: make(chan struct{}, 1)}
	t.broadcasts[s] = struct{}{}
	s.teardown.Do(func() {}) // no client to close
	return s
}

// Guarantee: once a subscription is closed, Receive returns
// ErrSubscriptionClosed at once, balanced or broadcast: what was fetched
// and not received is not handed out (a balanced member's group
// delivers it again), and a broadcast subscriber no longer counts in the
// topic's Stats.
func TestReceiveAfterCloseHandsOutNothingFetched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dst := make([]topic.Envelope[int], 1)
		m := newMember(8, time.Second, time.Minute)
		defer m.cancel()
		c := kafkaoffset.New(session{}, "t", 0)
		if !m.push(t.Context(), c, []delivery[int]{{c: c, off: 0, v: 1}}) {
			t.Fatal("push to an empty read-ahead failed")
		}
		m.stopOnce.Do(func() {}) // no client to close
		m.Close()
		if n, err := m.Receive(t.Context(), dst); n != 0 || !errors.Is(err, topic.ErrSubscriptionClosed) {
			t.Fatalf("balanced Receive after Close = %d, %v (value %d), want 0, ErrSubscriptionClosed", n, err, dst[0].Value)
		}
		s := newBroadcast(8, topic.DropOldest)
		if !s.push(bitem[int]{v: 1}) {
			t.Fatal("push to an empty read-ahead failed")
		}
		s.Close()
		if n := s.t.Stats().BroadcastSubscribers; n != 0 {
			t.Fatalf("Stats().BroadcastSubscribers = %d after the subscriber closed, want 0", n)
		}
		if n, err := s.Receive(t.Context(), dst); n != 0 || !errors.Is(err, topic.ErrSubscriptionClosed) {
			t.Fatalf("broadcast Receive after Close = %d, %v (value %d), want 0, ErrSubscriptionClosed", n, err, dst[0].Value)
		}
	})
}

// Guarantee: a broadcast subscriber disconnected under on_lag disconnect
// gets one final lag notice counting everything it had not read: the
// partition's unread records, the records it had queued and the lag
// notices it had queued; the topic's Lagged counts the same, and the
// subscription then ends.
func TestADisconnectNoticeCountsWhatWasQueued(t *testing.T) {
	s := newBroadcast(8, topic.Disconnect)
	for _, it := range []bitem[int]{{v: 1}, {lagged: 5}, {v: 2}} {
		if !s.push(it) {
			t.Fatal("push to the read-ahead failed")
		}
	}
	s.disconnect(10)
	dst := make([]topic.Envelope[int], 4)
	n, err := s.Receive(t.Context(), dst)
	if n != 1 || err != nil || dst[0].Lagged != 17 {
		t.Fatalf("Receive after the disconnect = %d, %v, %+v, want one notice of 17 missed (10 unread, 2 queued, 5 in a queued notice)", n, err, dst[:n])
	}
	if got := s.t.Stats().Lagged; got != 17 {
		t.Fatalf("Stats().Lagged = %d, want 17", got)
	}
	if n, err := s.Receive(t.Context(), dst); n != 0 || !errors.Is(err, topic.ErrSubscriptionClosed) {
		t.Fatalf("Receive after the final notice = %d, %v, want 0, ErrSubscriptionClosed", n, err)
	}
}

// Guarantee: a topic's Stats count apart the records its broadcast
// subscribers missed (Lagged) and those its subscriptions skipped as not
// decoding (Undecodable).
func TestStatsCountLaggedAndUndecodableRecordsApart(t *testing.T) {
	s := newBroadcast(8, topic.DropOldest)
	s.t.lagged.Add(3)
	s.t.undecodable.Add(2)
	if st := s.t.Stats(); st.Lagged != 3 || st.Undecodable != 2 || st.BroadcastSubscribers != 1 {
		t.Fatalf("Stats = %+v, want Lagged 3, Undecodable 2, BroadcastSubscribers 1", st)
	}
}

// Guarantee: the memory a subscriber's read-ahead keeps stays bounded by
// its capacity however many records pass through it, balanced or
// broadcast.
func TestTheReadAheadsMemoryStaysBoundedByItsCapacity(t *testing.T) {
	const capacity, records = 4, 10000
	dst := make([]topic.Envelope[int], 1)
	m := newMember(capacity, time.Second, time.Minute)
	defer m.cancel()
	c := kafkaoffset.New(session{}, "t", 0)
	s := newBroadcast(capacity, topic.DropOldest)
	for v := range records {
		if !m.push(t.Context(), c, []delivery[int]{{c: c, off: int64(v), v: v}}) || !s.push(bitem[int]{v: v}) {
			t.Fatal("push to an empty read-ahead failed")
		}
		if n, err := m.Receive(t.Context(), dst); n != 1 || err != nil {
			t.Fatalf("balanced Receive = %d, %v", n, err)
		}
		if err := m.Settle(dst[0].ID, nil); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Receive(t.Context(), dst); n != 1 || err != nil {
			t.Fatalf("broadcast Receive = %d, %v", n, err)
		}
	}
	if got := cap(m.queue); got > 4*capacity {
		t.Fatalf("after %d records the balanced read-ahead keeps room for %d, want at most %d", records, got, 4*capacity)
	}
	if got := cap(s.queue); got > 4*capacity {
		t.Fatalf("after %d records the broadcast read-ahead keeps room for %d, want at most %d", records, got, 4*capacity)
	}
}

// Guarantee: the first fetch of a balanced member that cannot be decoded
// is the one Receive returns and the one logged, on one ERROR line; a
// later one, of the same partition or another, changes neither.
func TestOnlyTheFirstUndecodableFetchEndsABalancedSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMember(8, time.Second, time.Minute)
		defer m.cancel()
		var logs strings.Builder
		m.t.b.log = slog.New(slog.NewTextHandler(&logs, nil))
		m.stopOnce.Do(func() {}) // no client to close
		m.fetchFrom[0], m.fetchFrom[1] = 5, 7
		m.endCorrupt(&sarama.ConsumerError{Topic: "t", Partition: 0, Err: sarama.PacketDecodingError{Info: "CRC didn't match"}})
		m.endCorrupt(&sarama.ConsumerError{Topic: "t", Partition: 1, Err: sarama.PacketDecodingError{Info: "CRC didn't match"}})
		synctest.Wait()
		m.mu.Lock()
		m.ended = true // as the stop endCorrupt started leaves it
		m.mu.Unlock()
		_, err := m.Receive(t.Context(), make([]topic.Envelope[int], 1))
		if !errors.Is(err, ErrCorruptBatch) || !strings.Contains(err.Error(), `"t"/0 from offset 5`) {
			t.Fatalf("Receive = %v, want the first fetch's error, naming \"t\"/0 from offset 5", err)
		}
		if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
			t.Fatalf("%d ERROR lines, want 1:\n%s", n, logs.String())
		}
	})
}

// Guarantee: a subscriber's OnRelease, or the done it returned, that
// panics or ends its goroutine (runtime.Goexit, as t.FailNow does) costs
// one error line with the stack: the revoke, on the client's goroutine,
// goes on as if it had returned, waits for the messages held and lets the
// partition go once they are settled.
func TestAnOnReleaseThatPanicsOrExitsLetsTheRevokeGoOn(t *testing.T) {
	for _, c := range []struct {
		name, want string
		onRelease  func() func()
	}{
		{"OnRelease panics", hookcall.ReleasePanicked, func() func() { panic("release hook broke") }},
		{"OnRelease exits", hookcall.ReleaseExited, func() func() { runtime.Goexit(); return nil }},
		{"done panics", hookcall.ReleasePanicked, func() func() { return func() { panic("done broke") } }},
		{"done exits", hookcall.ReleaseExited, func() func() { return runtime.Goexit }},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log logtest.Records
				m := newMember(8, time.Second, time.Minute)
				defer m.cancel()
				m.t.b.log = slog.New(&log)
				m.onRelease = c.onRelease
				held := kafkaoffset.New(session{}, "t", 0)
				got := receiveAll(t, m, held, 1)
				released := make(chan struct{})
				go func() {
					m.release(held)
					close(released)
				}()
				synctest.Wait()
				select {
				case <-released:
					t.Fatal("the revoke let the partition go while its message was held")
				default:
				}
				if err := m.Settle(got[0].ID, nil); err != nil {
					t.Fatal(err)
				}
				<-released
				if n := log.Count(slog.LevelError, c.want); n != 1 {
					t.Fatalf("%d ERROR lines %q, want 1", n, c.want)
				}
			})
		})
	}
}

// Guarantee: a read-ahead whose records were all handed out starts again
// from the front of its slice, and one compacted moves its live records to
// the front and keeps no reference to any record past them.
func TestAReadAheadCompactedHoldsOnlyItsLiveRecords(t *testing.T) {
	q := []*int{new(int), new(int), new(int)}
	if got, head := compactQueue(q, len(q)); len(got) != 0 || head != 0 {
		t.Errorf("a read-ahead with none of its 3 records live is %d long from %d, want 0 from 0", len(got), head)
	}
	const live = 2
	q = make([]*int, queueCompactAt+1+live)
	for i := range q {
		q[i] = new(int)
		*q[i] = i
	}
	head := len(q) - live
	clear(q[:head]) // handed out
	got, gotHead := compactQueue(q, head)
	if len(got) != live || gotHead != 0 || *got[0] != head || *got[1] != head+1 {
		t.Fatalf("a compacted read-ahead is %d long from %d, want its %d live records from 0", len(got), gotHead, live)
	}
	for i, r := range got[live:cap(got)] {
		if r != nil {
			t.Fatalf("the compacted read-ahead still holds record %d at %d, past its live records", *r, live+i)
		}
	}
}
