package kafkatopic_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/topic/topictest"
)

// recvNothing checks that nothing arrives for a short while.
func recvNothing[T any](t testing.TB, s *topic.Subscription[T]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if it, err := s.Receive(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive = %+v, %v; want nothing", it, err)
	}
}

// recvValues receives n messages and returns their values in order.
func recvValues[T any](t testing.TB, s *topic.Subscription[T], n int) ([]T, []topic.MessageID) {
	t.Helper()
	vs := make([]T, 0, n)
	ids := make([]topic.MessageID, 0, n)
	for range n {
		it := recv(t, s)
		if it.Lagged != 0 {
			t.Fatalf("lag notice %+v on a balanced subscription", it)
		}
		vs = append(vs, it.Value)
		ids = append(ids, it.ID)
	}
	return vs, ids
}

// Members of one group in one process share the topic's partitions:
// each message reaches exactly one of them, and both get a share.
func TestMembersSharePartitions(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[string](c, topic.StringCodec{})
	o.Partitions = 4
	o.Key = func(v string) []byte { return []byte(v) }
	b := newBackend(t, o)
	h := newTopic(t, b, "shared", topic.Options{})
	m1, m2 := subscribe(t, h, topic.Balanced("g")), subscribe(t, h, topic.Balanced("g"))
	const n = 200
	for i := range n {
		if err := h.Publish(ctxT(t), "k"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	per := [2]int{}
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, m := range []*topic.Subscription[string]{m1, m2} {
		wg.Go(func() {
			for {
				it, err := m.Receive(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				seen[it.Value]++
				per[i]++
				mu.Unlock()
				if err := m.Ack(it.ID); err != nil {
					t.Errorf("Ack: %v", err)
				}
			}
		})
	}
	wait.Within(t, patience, "every message received", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	})
	cancel()
	wg.Wait()
	for v, k := range seen {
		if k != 1 {
			t.Fatalf("%s received %d times", v, k)
		}
	}
	if per[0] == 0 || per[1] == 0 {
		t.Fatalf("shares %v: a member got nothing", per)
	}
}

// A group commits only the contiguous prefix of settled messages: acks
// after an unsettled message are delivered again with it when the member
// leaves; once the prefix is settled nothing is delivered again.
func TestCommitsContiguousPrefix(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, testOptions[int](c, topic.IntCodec{}))
	h := newTopic(t, b, "prefix", topic.Options{})
	m := subscribe(t, h, topic.Balanced("g"))
	for i := 1; i <= 5; i++ {
		if err := h.Publish(ctxT(t), i); err != nil {
			t.Fatal(err)
		}
	}
	_, ids := recvValues(t, m, 5)
	for _, id := range ids[1:] { // 2..5 acked, 1 not
		if err := m.Ack(id); err != nil {
			t.Fatal(err)
		}
	}
	m.Close()
	m = subscribe(t, h, topic.Balanced("g"))
	vs, ids := recvValues(t, m, 5)
	if want := []int{1, 2, 3, 4, 5}; !equal(vs, want) {
		t.Fatalf("after leaving with 1 unsettled: %v, want %v", vs, want)
	}
	for _, id := range ids {
		if err := m.Ack(id); err != nil {
			t.Fatal(err)
		}
	}
	m.Close()
	m = subscribe(t, h, topic.Balanced("g"))
	recvNothing(t, m)
	if err := h.Publish(ctxT(t), 6); err != nil {
		t.Fatal(err)
	}
	if vs, _ := recvValues(t, m, 1); vs[0] != 6 {
		t.Fatalf("received %v, want 6", vs)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Guarantee: a record the codec cannot decode, or panics on, is logged
// and counted (Stats().Undecodable) once for the group and committed
// past, and once for a broadcast subscriber; both go on with the next
// record.
func TestUndecodableRecordSkipped(t *testing.T) {
	for _, codec := range []topic.Codec[int]{topic.IntCodec{}, topictest.PanickingCodec[int]{Codec: topic.IntCodec{}}} {
		t.Run(fmt.Sprintf("%T", codec), func(t *testing.T) { undecodableRecordSkipped(t, codec) })
	}
}

func undecodableRecordSkipped(t *testing.T, codec topic.Codec[int]) {
	c := testbroker.Kafka(t)
	var logs logBuffer
	o := testOptions[int](c, codec)
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	b := newBackend(t, o)
	h := newTopic(t, b, "mixed-bytes", topic.Options{Mode: topic.Mixed})
	m := subscribe(t, h, topic.Balanced("g"))
	bc := subscribe(t, h, topic.Broadcast())
	pc := testbroker.SaramaConfig()
	pc.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(c.ListenAddrs(), pc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "mixed-bytes", Value: sarama.StringEncoder("not an int")}); err != nil {
		t.Fatal(err)
	}
	if err := h.Publish(ctxT(t), 7); err != nil {
		t.Fatal(err)
	}
	vs, ids := recvValues(t, m, 1)
	if vs[0] != 7 {
		t.Fatalf("received %v, want 7", vs)
	}
	if err := m.Ack(ids[0]); err != nil {
		t.Fatal(err)
	}
	if it := recv(t, bc); it.Value != 7 {
		t.Fatalf("the broadcast subscriber received %d, want 7", it.Value)
	}
	if n := strings.Count(logs.String(), "does not decode"); n != 2 {
		t.Fatalf("%d decode warnings, want 2 (the group's and the broadcast subscriber's): %s", n, logs.String())
	}
	if n := h.Stats().Undecodable; n != 2 {
		t.Fatalf("Stats().Undecodable = %d, want 2 (the group's and the broadcast subscriber's)", n)
	}
	m.Close()
	m = subscribe(t, h, topic.Balanced("g"))
	recvNothing(t, m)
	if n := strings.Count(logs.String(), "does not decode"); n != 2 {
		t.Fatalf("the undecodable record was read again: %s", logs.String())
	}
	if n := h.Stats().Undecodable; n != 2 {
		t.Fatalf("Stats().Undecodable = %d after a new member, want still 2", n)
	}
}

// A member's read-ahead is bounded by balanced.queue_capacity: with
// nobody receiving it fetches that many records and stops, the publisher
// is not slowed down, and a receive makes room for one more.
func TestReadAheadBoundedByCapacity(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, testOptions[int](c, topic.IntCodec{}))
	h := newTopic(t, b, "slow", topic.Options{Balanced: topic.BalancedPolicy{Capacity: 4}})
	m := subscribe(t, h, topic.Balanced("g"))
	ctx := ctxT(t)
	for i := range 100 {
		if err := h.Publish(ctx, i); err != nil {
			t.Fatalf("Publish %d: %v", i, err)
		}
	}
	full := func() bool { ra := kafkatopic.ReadAhead(b); return len(ra) == 1 && ra[0] == 4 }
	wait.Within(t, patience, "the member's read-ahead to fill", full)
	for range 20 { // it stays at the bound
		if ra := kafkatopic.ReadAhead(b); len(ra) != 1 || ra[0] > 4 {
			t.Fatalf("read-ahead %v, want at most 4", ra)
		}
		time.Sleep(5 * time.Millisecond) // sampling, not synchronising: the bound must hold at every sample
	}
	if vs, _ := recvValues(t, m, 1); vs[0] != 0 {
		t.Fatalf("received %v, want 0", vs)
	}
	wait.Within(t, patience, "the read-ahead to refill", full)
	if st := h.Stats(); st.Published != 100 || st.BalancedGroups != 1 {
		t.Fatalf("Stats = %+v", st)
	}
}

// Guarantee: the records sarama buffers below a subscriber are bounded by
// its queue capacity together, as its own queue is. Each partition's
// channel gets a share of the capacity (one
// record at the least), whatever Config.ChannelBufferSize says (256 by
// default), so a topic of many partitions does not multiply the
// read-ahead by its partition count.
func TestReadAheadOfEveryPartitionSharesTheCapacity(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.Partitions = 4
	b := newBackend(t, o)
	h := newTopic(t, b, "wide", topic.Options{Mode: topic.Mixed,
		Balanced:  topic.BalancedPolicy{Capacity: 8},
		Broadcast: topic.BroadcastPolicy{Capacity: 12}})
	subscribe(t, h, topic.Balanced("g"))
	subscribe(t, h, topic.Broadcast())
	members, broadcasts := kafkatopic.ChannelBuffers(b)
	if len(members) != 1 || members[0] != 8/4 {
		t.Errorf("a member's channel per partition holds %v records, want [%d] (a quarter of balanced.queue_capacity 8)", members, 8/4)
	}
	if len(broadcasts) != 1 || broadcasts[0] != 12/4 {
		t.Errorf("a broadcast subscriber's channel per partition holds %v records, want [%d] (a quarter of broadcast.queue_capacity 12)", broadcasts, 12/4)
	}
}

// A new group starts at the log end as of its first Subscribe returning,
// even when no member is left to read by the time messages arrive:
// records published before are not delivered, records published after
// are, to whichever member joins later.
func TestNewGroupStartsAtSubscribe(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.Partitions = 2
	b := newBackend(t, o)
	h := newTopic(t, b, "start", topic.Options{})
	for _, v := range []int{1, 2} {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
	}
	m := subscribe(t, h, topic.Balanced("late"))
	m.Close()
	for _, v := range []int{3, 4, 5} {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
	}
	m = subscribe(t, h, topic.Balanced("late"))
	got := map[int]bool{}
	vs, _ := recvValues(t, m, 3)
	for _, v := range vs {
		got[v] = true
	}
	if !got[3] || !got[4] || !got[5] {
		t.Fatalf("received %v, want 3, 4 and 5", vs)
	}
	recvNothing(t, m)
}

// Rebalancing: a member that loses a partition waits up to RevokeTimeout
// for the messages of it that it handed out; settled in time, they are
// committed and nobody receives them again. Settled too late, the ack is
// refused with ErrRevoked, the group delivers the message again, and the
// member says so in one WARN line naming how many it held.
func TestRevokeWaitsForHandedOutMessages(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		settled bool // acked while the member still holds the partition
	}{{"in time", patience, true}, {"too late", time.Millisecond, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			o := testOptions[int](c, topic.IntCodec{})
			o.RevokeTimeout = tc.timeout
			var logs logtest.Lines
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			b := newBackend(t, o)
			h := newTopic(t, b, "revoke", topic.Options{})
			a := subscribe(t, h, topic.Balanced("g"))
			if err := h.Publish(ctxT(t), 1); err != nil {
				t.Fatal(err)
			}
			it := recv(t, a)
			joined := make(chan *topic.Subscription[int], 1)
			go func() {
				s, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
				if err != nil {
					t.Error(err)
				}
				joined <- s
			}()
			var second *topic.Subscription[int]
			if tc.settled {
				// The join waits for a to let its partition go, which waits
				// for the message a holds.
				select {
				case <-joined:
					t.Fatal("the new member joined while the message was still held")
				case <-time.After(200 * time.Millisecond): // a check that something does not happen
				}
				if err := a.Ack(it.ID); err != nil {
					t.Fatalf("Ack during the rebalance: %v", err)
				}
				second = <-joined
			} else {
				second = <-joined
				if err := a.Ack(it.ID); !errors.Is(err, kafkatopic.ErrRevoked) {
					t.Fatalf("Ack after the partition moved = %v, want ErrRevoked", err)
				}
			}
			if second == nil {
				t.FailNow()
			}
			defer second.Close()
			// Whoever holds the partition now receives 1 again only if it
			// was not committed. A committed message is checked not to
			// come for 2s; one not committed comes once the new claim has
			// fetched it, however long that takes on a busy machine
			// (patience), and is checked not to come a second time for 2s
			// more.
			const quiet = 2 * time.Second
			got := make(chan topic.Item[int], 2)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			for _, s := range []*topic.Subscription[int]{a, second} {
				wg.Go(func() {
					if it, err := s.Receive(ctx); err == nil {
						got <- it
					}
				})
			}
			var items []topic.Item[int]
			until := time.After(quiet)
			if !tc.settled {
				until = time.After(patience)
			}
		collect:
			for {
				select {
				case it := <-got:
					items = append(items, it)
					until = time.After(quiet)
				case <-until:
					break collect
				}
			}
			cancel()
			wg.Wait()
			close(got)
			for it := range got {
				items = append(items, it)
			}
			n := 0
			for _, it := range items {
				if it.Value != 1 {
					t.Fatalf("received %+v", it)
				}
				n++
			}
			if tc.settled && n != 0 {
				t.Fatalf("a message acked during the rebalance was delivered %d more times", n)
			}
			if !tc.settled && n != 1 {
				t.Fatalf("a message acked too late was delivered %d more times, want 1", n)
			}
			warned := 1
			if tc.settled {
				warned = 0
			}
			logs.Want(t, warned, "lines saying the partition was released with a message held",
				"level=WARN", kafkatopic.ReleasedHeldLog, "held=1", "partition=0")
		})
	}
}

// Guarantee: every group session of a balanced member is logged at INFO,
// once as it starts (naming the partitions it claims) and once as it
// ends, so a rebalance shows in the log as the Kafka source's do.
func TestGroupSessionsAreLoggedAtInfo(t *testing.T) {
	_, h, logs := newLoggingTopic(t, "sessions")
	subscribe(t, h, topic.Balanced("g"))
	wait.For(t, "the first member's session line", func() bool { return logs.Count(kafkatopic.SessionStartedLog) >= 1 })
	logs.Want(t, 1, "session lines of the first member", "level=INFO", kafkatopic.SessionStartedLog,
		"group=sessions:g", "generation=1", "claims=[sessions/0]")
	subscribe(t, h, topic.Balanced("g")) // a rebalance: the first member's session ends, two start
	wait.For(t, "the rebalance's session lines", func() bool {
		return logs.Count(kafkatopic.SessionStartedLog) >= 3 && logs.Count(kafkatopic.SessionEndedLog) >= 1
	})
	logs.Want(t, 0, "session lines not at INFO", "kafkatopic: group session", "level=WARN")
}

// Guarantee: AdminTimeout bounds a balanced Subscribe even while the join
// it sent waits at the coordinator for a rebalance (here, a member holding
// a message of the partition it must give up): Subscribe returns ErrJoin by
// then, not when the coordinator finally answers.
func TestSubscribeReturnsByAdminTimeoutWhileTheGroupRebalances(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.AdminTimeout = 2 * time.Second
	o.RevokeTimeout = patience // a keeps its partition while it holds 1
	o.Config.Consumer.Group.Rebalance.Timeout = patience
	b := newBackend(t, o)
	h := newTopic(t, b, "join-bound", topic.Options{})
	a := subscribe(t, h, topic.Balanced("g"))
	if err := h.Publish(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	it := recv(t, a)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		s, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
		if s != nil {
			s.Close()
		}
		done <- err
	}()
	bound := o.AdminTimeout + 3*time.Second // the join's own steps, on a loaded machine
	select {
	case err := <-done:
		if !errors.Is(err, kafkatopic.ErrJoin) {
			t.Fatalf("Subscribe during the rebalance = %v, want ErrJoin", err)
		}
	case <-time.After(bound):
		t.Errorf("Subscribe still waiting %v after it started, AdminTimeout %v", time.Since(start).Round(time.Millisecond), o.AdminTimeout)
	}
	// Let the rebalance finish, so that everything closes promptly.
	if err := a.Ack(it.ID); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if t.Failed() {
		t.Logf("Subscribe returned %v after %v", <-done, time.Since(start).Round(time.Millisecond))
	}
}

// Guarantee: Close returns by its context's deadline when the cluster
// stops answering, with an error that wraps it and names what is still
// closing, and the closing it leaves running (leaving the group, closing
// the clients) ends at once too: a later Close, which waits for it,
// returns promptly instead of after sarama's read timeouts.
func TestCloseCutsConnectionsAtItsDeadline(t *testing.T) {
	c := testbroker.Kafka(t)
	b, err := kafkatopic.New(testOptions[int](c, topic.IntCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := topic.NewTopic[int]("hung", topic.Options{}, topic.Backend[int](b))
	if err != nil {
		t.Fatal(err)
	}
	s := subscribe(t, h, topic.Balanced("g"))
	if err := h.Publish(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	it := recv(t, s)
	if err := s.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	testbroker.HangKafka(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with the cluster hung = %v, want an error wrapping context.DeadlineExceeded", err)
	} else if !strings.HasPrefix(err.Error(), "kafkatopic: closing the backend: its topics") {
		t.Errorf("Close with the cluster hung = %q, want an error naming the backend and what is still closing", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Close(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("second Close = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the closing left running after the deadline still runs 10s later")
	}
}

// Guarantee: a subscription's Close, and the topic's Close that stops its
// subscribers, return within Options.AdminTimeout (plus the time to cut
// the subscriber's connections) when the cluster stops answering, for a
// group member and a broadcast subscriber alike, instead of waiting for
// sarama's requests for minutes.
func TestSubscriberCloseReturnsWithinAdminTimeoutWhenTheClusterHangs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mode      topic.SubscriptionMode
		viaHandle bool
	}{
		{"member Close", topic.Balanced("g"), false},
		{"member stopped by the topic's Close", topic.Balanced("g"), true},
		{"broadcast Close", topic.Broadcast(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			o := testOptions[int](c, topic.IntCodec{})
			o.AdminTimeout = 5 * time.Second
			b, h := mixedTopic(t, o, "hung")
			s, err := h.Subscribe(t.Context(), tc.mode, topic.SubscriberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Publish(ctxT(t), 1); err != nil {
				t.Fatal(err)
			}
			it := recv(t, s)
			if err := s.Ack(it.ID); err != nil && !errors.Is(err, topic.ErrMessageNotTracked) {
				t.Fatal(err)
			}
			testbroker.HangKafka(t, c)
			start := time.Now()
			done := make(chan struct{})
			go func() {
				defer close(done)
				if tc.viaHandle {
					h.Close()
				} else {
					s.Close()
				}
			}()
			bound := o.AdminTimeout + 10*time.Second
			select {
			case <-done:
			case <-time.After(bound):
				t.Errorf("Close still waiting %v after the cluster stopped answering (AdminTimeout %v)", bound, o.AdminTimeout)
			}
			// Closing the backend past its deadline cuts every connection,
			// so that whatever still waits ends before the test does.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = b.Close(ctx)
			<-done
			h.Close()
			t.Logf("Close returned after %v", time.Since(start).Round(time.Millisecond))
		})
	}
}

// Guarantee: AdminTimeout bounds a Subscribe, balanced or broadcast, when
// the cluster stops answering (at once, or from the metadata request a
// subscriber's new client starts with, from a member's join request, or
// from a broadcast subscriber's first offset request): it returns an error
// by then (plus the time to cut the subscriber's connections) instead of
// waiting for sarama's read timeouts, request after request.
func TestSubscribeReturnsWithinAdminTimeoutWhenTheClusterHangs(t *testing.T) {
	subscribeToHungCluster(t, 3*time.Second, 10*time.Minute)
}

// Guarantee: the caller's context bounds a Subscribe, balanced or
// broadcast, as AdminTimeout does, whichever ends first: with the cluster
// no longer answering (as above) and a long AdminTimeout, it returns by
// its context's deadline (plus the time to cut the subscriber's
// connections).
func TestSubscribeReturnsByItsContextsDeadlineWhenTheClusterHangs(t *testing.T) {
	subscribeToHungCluster(t, 10*time.Minute, 2*time.Second)
}

// subscribeToHungCluster subscribes, with a context ending after wait, to
// a topic whose backend has the given AdminTimeout on a cluster that
// stopped answering, in each way a cluster can hang under a Subscribe,
// and checks that the Subscribe returns by the sooner of the two (plus
// the time to cut connections) with a *topic.TopicError wrapping
// context.DeadlineExceeded.
func subscribeToHungCluster(t *testing.T, adminTimeout, wait time.Duration) {
	hangOnly := func(key kmsg.Key) func(*testing.T, *kfake.Cluster) {
		return func(t *testing.T, c *kfake.Cluster) { hangKafkaFrom(t, c, key) }
	}
	for _, tc := range []struct {
		name string
		mode topic.SubscriptionMode
		hang func(*testing.T, *kfake.Cluster)
	}{
		{"balanced", topic.Balanced("g"), func(t *testing.T, c *kfake.Cluster) { testbroker.HangKafka(t, c) }},
		{"balanced, metadata hung", topic.Balanced("g"), hangOnly(kmsg.Metadata)},
		{"balanced, join hung", topic.Balanced("g"), hangOnly(kmsg.JoinGroup)},
		{"balanced, the topic's metadata hung", topic.Balanced("g"), hangTopicMetadata},
		{"broadcast", topic.Broadcast(), func(t *testing.T, c *kfake.Cluster) { testbroker.HangKafka(t, c) }},
		{"broadcast, offsets hung", topic.Broadcast(), hangOnly(kmsg.ListOffsets)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			o := testOptions[int](c, topic.IntCodec{})
			o.AdminTimeout = adminTimeout
			b, h := mixedTopic(t, o, "hung")
			tc.hang(t, c)
			ctx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				s, err := h.Subscribe(ctx, tc.mode, topic.SubscriberOptions{})
				if s != nil {
					s.Close()
				}
				done <- err
			}()
			bound := min(adminTimeout, wait) + 10*time.Second
			select {
			case err := <-done:
				var te *topic.TopicError
				if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Subscribe with the cluster hung = %v, want a *topic.TopicError wrapping context.DeadlineExceeded", err)
				}
				t.Logf("Subscribe returned %v after %v", err, time.Since(start).Round(time.Millisecond))
			case <-time.After(bound):
				t.Errorf("Subscribe still waiting %v after the cluster stopped answering (its context's deadline %v, AdminTimeout %v)", bound, wait, adminTimeout)
				defer func() { <-done }() // ends once Close below cuts the connections
			}
			// Closing the backend past its deadline cuts every connection,
			// so that whatever still waits ends before the test does.
			cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
			defer ccancel()
			_ = b.Close(cctx)
			h.Close()
		})
	}
}

// hangTopicMetadata makes c answer a request for the metadata of every
// topic with none, as a broker that has not heard of a topic just created
// does, so that a client must ask for the topic by name; from the first
// such request on, c answers nothing, as hangKafkaFrom. The other
// requests are answered.
func hangTopicMetadata(t *testing.T, c *kfake.Cluster) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if r := req.(*kmsg.MetadataRequest); r.Topics == nil {
			r.Topics = []kmsg.MetadataRequestTopic{} // the brokers, no topic
			return nil, nil, false
		}
		<-release
		return nil, nil, false
	})
}

// Guarantee: the backend's Close waits for a Subscribe under way (here
// connecting its client while the cluster has stopped answering), which
// the closing of its topic ends: once Close has returned nil, the
// Subscribe has returned and nothing of it still runs.
func TestCloseWaitsForASubscribeUnderWay(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode topic.SubscriptionMode
	}{{"balanced", topic.Balanced("g")}, {"broadcast", topic.Broadcast()}} {
		mode := tc.mode
		t.Run(tc.name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			b, err := kafkatopic.New(testOptions[int](c, topic.IntCodec{}))
			if err != nil {
				t.Fatal(err)
			}
			h, err := topic.NewTopic[int]("closing", topic.Options{Mode: topic.Mixed}, topic.Backend[int](b))
			if err != nil {
				t.Fatal(err)
			}
			held := hangKafkaFrom(t, c, kmsg.Metadata)
			done := make(chan error, 1)
			go func() {
				s, err := h.Subscribe(t.Context(), mode, topic.SubscriberOptions{})
				if s != nil {
					s.Close()
				}
				done <- err
			}()
			select {
			case <-held:
			case <-time.After(patience):
				t.Fatal("the Subscribe sent no metadata request")
			}
			// The Subscribe's work: joining the group, or a broadcast
			// subscriber's connecting.
			work := "kafkatopic.(*kTopic[...]).joinGroup("
			if mode.IsBroadcast() {
				work = "kafkatopic.(*kTopic[...]).subscribeBroadcast("
			}
			if _, in := runningIn(work); !in {
				t.Fatalf("no goroutine in %s while its metadata request is held", work)
			}
			if err := b.Close(ctxT(t)); err != nil {
				t.Fatalf("Close = %v", err)
			}
			// The backend's Subscribe has done its work (it may still be
			// returning, and the caller's goroutine may not have run on
			// yet to report it).
			if stack, in := runningIn(work); in {
				t.Errorf("Close returned while a Subscribe was still under way:\n%s", stack)
			}
			if err := <-done; err == nil {
				t.Errorf("Subscribe cut short by Close = nil, want an error")
			}
		})
	}
}

// runningIn returns the stack of a goroutine that is running a function
// whose name holds fn, if any.
func runningIn(fn string) (string, bool) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(fn)) {
			return string(g), true
		}
	}
	return "", false
}

// mixedTopic makes a backend with o, not closed when the test ends (the
// test closes it), and its mixed-mode topic name.
func mixedTopic(t *testing.T, o kafkatopic.Options[int], name topic.Name) (*kafkatopic.Backend[int], *topic.Handle[int]) {
	t.Helper()
	b, err := kafkatopic.New(o)
	if err != nil {
		t.Fatal(err)
	}
	h, err := topic.NewTopic[int](name, topic.Options{Mode: topic.Mixed}, topic.Backend[int](b))
	if err != nil {
		t.Fatal(err)
	}
	return b, h
}
