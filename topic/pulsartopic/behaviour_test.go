package pulsartopic_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
	"github.com/boulevard-go/boulevard/topic/topictest"
)

func newHandle(t *testing.T, be *pulsartopic.Backend[int], name topic.Name, o topic.Options) *topic.Handle[int] {
	t.Helper()
	h, err := topic.NewTopic[int](name, o, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func subscribe(t *testing.T, h *topic.Handle[int], mode topic.SubscriptionMode) *topic.Subscription[int] {
	t.Helper()
	s, err := h.Subscribe(t.Context(), mode, topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Guarantee: a publish that returned nil is stored on the broker: Publish
// waits for the broker's receipt.
func TestPublishStoredWhenItReturns(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	h := newHandle(t, be, "t", topic.Options{})
	for i := range 20 {
		if err := h.Publish(ctxT(t), i); err != nil {
			t.Fatal(err)
		}
		ms := b.Messages(be.TopicName("t"))
		if len(ms) != i+1 {
			t.Fatalf("after Publish(%d) returned, the broker holds %d messages", i, len(ms))
		}
		if v, _ := (topic.IntCodec{}).Decode(ms[i].Payload); v != i {
			t.Fatalf("stored message %d is %d", i, v)
		}
	}
}

// Guarantee: without a key, a balanced group is a durable Shared
// subscription named after the group; with Options.Key it is Key_Shared,
// messages carry their key, and the members each see one key's messages
// in publish order.
func TestGroupSubscriptionTypes(t *testing.T) {
	b := testbroker.Pulsar(t)
	plain := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	subscribe(t, newHandle(t, plain, "plain", topic.Options{}), topic.Balanced("workers"))
	if cs := b.Consumers(plain.TopicName("plain"), "workers"); len(cs) != 1 || cs[0].SubType != "Shared" {
		t.Fatalf("consumers without a key: %+v, want one Shared", cs)
	}

	o := testOptions[int](b, topic.IntCodec{})
	o.Key = func(v int) string { return fmt.Sprint(v % 3) }
	keyed := newBackend(t, o)
	h := newHandle(t, keyed, "keyed", topic.Options{})
	members := []*topic.Subscription[int]{subscribe(t, h, topic.Balanced("workers")), subscribe(t, h, topic.Balanced("workers"))}
	if cs := b.Consumers(keyed.TopicName("keyed"), "workers"); len(cs) != 2 || cs[0].SubType != "Key_Shared" {
		t.Fatalf("consumers with a key: %+v, want two Key_Shared", cs)
	}
	const n = 300
	for i := range n {
		if err := h.Publish(ctxT(t), i); err != nil {
			t.Fatal(err)
		}
	}
	if ms := b.Messages(keyed.TopicName("keyed")); ms[4].Key != "1" {
		t.Fatalf("message 4 has key %q, want \"1\"", ms[4].Key)
	}
	var mu sync.Mutex
	last := map[int]int{0: -3, 1: -2, 2: -1}
	owner := map[int]int{}
	total := 0
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	for m, sub := range members {
		wg.Go(func() {
			for {
				it, err := sub.Receive(ctx)
				if err != nil {
					return
				}
				_ = sub.Ack(it.ID)
				mu.Lock()
				k := it.Value % 3
				if o, ok := owner[k]; ok && o != m {
					t.Errorf("key %d reached members %d and %d", k, o, m)
				}
				owner[k] = m
				if it.Value != last[k]+3 {
					t.Errorf("key %d: %d after %d", k, it.Value, last[k])
				}
				last[k] = it.Value
				total++
				done := total == n
				mu.Unlock()
				if done {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	if total != n {
		t.Fatalf("received %d of %d", total, n)
	}
}

// Guarantee: a subscriber reads ahead at most its mode's queue capacity
// (balanced.queue_capacity for a group member, broadcast.queue_capacity
// for a broadcast subscriber, the other mode's left at its larger
// default): the broker never dispatches more to it than that before it
// receives.
func TestReadAheadBoundedByCapacity(t *testing.T) {
	const capacity = 16
	for _, c := range []struct {
		name string
		mode topic.SubscriptionMode
		o    topic.Options
	}{
		{"balanced", topic.Balanced("g"), topic.Options{Mode: topic.Mixed, Balanced: topic.BalancedPolicy{Capacity: capacity}}},
		{"broadcast", topic.Broadcast(), topic.Options{Mode: topic.Mixed, Broadcast: topic.BroadcastPolicy{Capacity: capacity}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := testbroker.Pulsar(t)
			be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
			h := newHandle(t, be, "t", c.o)
			sub := subscribe(t, h, c.mode)
			full := be.TopicName("t")
			name := subscriptionOf(t, b, full, c.mode, "")
			for i := range 100 {
				if err := h.Publish(ctxT(t), i); err != nil {
					t.Fatal(err)
				}
			}
			stats := func() pulsartest.ConsumerStats { return b.Consumers(full, name)[0] }
			wait.Within(t, patience, "the consumer's permits to be used", func() bool {
				s := stats()
				return s.Dispatched > 0 && s.Dispatched == min(100, s.PermitsGranted)
			})
			if s := stats(); s.Dispatched > capacity || s.PermitsGranted > capacity {
				t.Fatalf("dispatched %d (permits granted %d) before any receive; capacity %d", s.Dispatched, s.PermitsGranted, capacity)
			}
			for i := range 100 {
				it, err := sub.Receive(ctxT(t))
				if err != nil || it.Value != i {
					t.Fatalf("Receive = %+v, %v; want %d", it, err, i)
				}
				_ = sub.Ack(it.ID)
			}
		})
	}
}

// Guarantee: a record the codec cannot decode, or panics on, is logged
// once at WARN, counted (Stats().Undecodable) and acked (not delivered
// again), and the subscriber receives the next one.
func TestUndecodableRecordSkipped(t *testing.T) {
	for _, codec := range []topic.Codec[int]{topic.IntCodec{}, topictest.PanickingCodec[int]{Codec: topic.IntCodec{}}} {
		t.Run(fmt.Sprintf("%T", codec), func(t *testing.T) { undecodableRecordSkipped(t, codec) })
	}
}

func undecodableRecordSkipped(t *testing.T, codec topic.Codec[int]) {
	b := testbroker.Pulsar(t)
	var logs syncBuffer
	o := testOptions[int](b, codec)
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	be := newBackend(t, o)
	h := newHandle(t, be, "t", topic.Options{})
	sub := subscribe(t, h, topic.Balanced("g"))
	if _, err := b.Publish(ctxT(t), be.TopicName("t"), pulsartest.Message{Payload: []byte("not an int")}); err != nil {
		t.Fatal(err)
	}
	if err := h.Publish(ctxT(t), 9); err != nil {
		t.Fatal(err)
	}
	it, err := sub.Receive(ctxT(t))
	if err != nil || it.Value != 9 {
		t.Fatalf("Receive = %+v, %v; want 9", it, err)
	}
	if err := sub.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, patience, "both messages acked", func() bool { return b.Backlog(be.TopicName("t"), "g") == 0 })
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "cannot decode") {
		t.Fatalf("logs %q, want one WARN about the undecodable record", logs.String())
	}
	if n := h.Stats().Undecodable; n != 1 {
		t.Fatalf("Stats().Undecodable = %d, want 1", n)
	}
}

// Guarantee: on a partitioned topic, keyed messages spread over the
// partitions and a group receives every one of them.
func TestPartitionedRoundTrip(t *testing.T) {
	b := testbroker.Pulsar(t)
	o := testOptions[int](b, topic.IntCodec{})
	o.Partitions = 3
	o.Key = func(v int) string { return fmt.Sprint(v) }
	be := newBackend(t, o)
	h := newHandle(t, be, "t", topic.Options{})
	sub := subscribe(t, h, topic.Balanced("g"))
	const n = 60
	for i := range n {
		if err := h.Publish(ctxT(t), i); err != nil {
			t.Fatal(err)
		}
	}
	for p := range 3 {
		if len(b.Messages(pulsartest.PartitionTopic(be.TopicName("t"), p))) == 0 {
			t.Fatalf("partition %d got no message", p)
		}
	}
	seen := make(map[int]bool)
	for range n {
		it, err := sub.Receive(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		seen[it.Value] = true
		_ = sub.Ack(it.ID)
	}
	if len(seen) != n {
		t.Fatalf("received %d distinct messages of %d", len(seen), n)
	}
}

// Guarantee: closing a topic while publishes are under way leaves none of
// them waiting: each returns nil (and its message is stored) or
// ErrTopicClosed (and nothing was stored), within a bound, with no data
// race between sending and closing the producer.
func TestCloseWhilePublishingLeavesNoPublishWaiting(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	const publishers = 32
	for round := range 5 {
		name := topic.Name(fmt.Sprintf("closing-%d", round))
		h, err := topic.NewTopic[int](name, topic.Options{}, be)
		if err != nil {
			t.Fatal(err)
		}
		var published, running atomic.Int64
		errs := make(chan error, publishers)
		var wg sync.WaitGroup
		for range publishers {
			running.Add(1)
			wg.Go(func() {
				defer running.Add(-1)
				for {
					err := h.Publish(context.Background(), 1)
					if err != nil {
						errs <- err
						return
					}
					published.Add(1)
				}
			})
		}
		wait.Within(t, patience, "publishes under way", func() bool { return published.Load() >= 100 })
		h.Close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(patience):
			t.Fatalf("round %d: %d of %d publishes still waiting %v after Close", round, running.Load(), publishers, patience)
		}
		close(errs)
		for err := range errs {
			if !errors.Is(err, topic.ErrTopicClosed) {
				t.Fatalf("round %d: Publish racing Close = %v, want nil or ErrTopicClosed", round, err)
			}
		}
		if n := len(b.Messages(be.TopicName(name))); int64(n) != published.Load() {
			t.Fatalf("round %d: %d publishes returned nil, the broker stored %d", round, published.Load(), n)
		}
	}
}

// memoryTopic is the topic "memory" of a backend on a broker whose
// client's memory limit (pulsar.ClientOptions.MemoryLimitBytes) is 4096
// bytes.
func memoryTopic(t *testing.T) (*pulsartest.Broker, *pulsartopic.Backend[string], *topic.Handle[string]) {
	t.Helper()
	b := testbroker.Pulsar(t)
	o := testOptions[string](b, topic.StringCodec{})
	o.ClientOptions.MemoryLimitBytes = 4096
	be := newBackend(t, o)
	h, err := topic.NewTopic[string]("memory", topic.Options{}, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return b, be, h
}

// Guarantee: on_full block waits for room when concurrent publishes fill
// the client's memory limit (pulsar.ClientOptions.MemoryLimitBytes), as it
// does for the pending queue: every publish returns nil and is stored.
func TestBlockingPublishWaitsForTheClientMemoryLimit(t *testing.T) {
	b, be, h := memoryTopic(t)
	v := strings.Repeat("x", 1500) // two or three fill the client's memory
	const publishers = 32
	errs := make(chan error, publishers)
	var wg sync.WaitGroup
	for range publishers {
		wg.Go(func() { errs <- h.Publish(ctxT(t), v) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("blocking Publish with the client's memory full = %v, want nil", err)
		}
	}
	if n := len(b.Messages(be.TopicName("memory"))); n != publishers {
		t.Fatalf("the broker stored %d messages, want %d", n, publishers)
	}
}

// Guarantee: a drop_newest publish that finds the client's memory limit
// (pulsar.ClientOptions.MemoryLimitBytes) full reports DroppedOnFull, as
// one that finds the pending queue full does, and does not fail.
func TestADropNewestPublishReportsDroppedOnFullWhileTheClientMemoryIsFull(t *testing.T) {
	b, _, h := memoryTopic(t)
	v := strings.Repeat("x", 1500) // two fill the client's memory
	// The receipts withheld, each publish holds its memory: a few fill it.
	release := b.Withhold(pulsartest.CommandSend)
	t.Cleanup(release)
	for range 8 {
		ctx, cancel := context.WithTimeout(ctxT(t), 50*time.Millisecond)
		out, err := h.PublishWith(ctx, v, topic.DropNewest)
		cancel()
		switch {
		case err == nil && out == topic.DroppedOnFull:
			return
		case errors.Is(err, context.DeadlineExceeded):
			continue // sent, its receipt withheld
		}
		t.Fatalf("drop_newest publish with the client's memory full = %v, %v; want DroppedOnFull", out, err)
	}
	t.Fatal("8 publishes of 1500 bytes, their receipts withheld, never filled a memory limit of 4096 bytes")
}

// Guarantee: while the broker leaves the close of a topic's producer and
// of a subscriber's consumer unanswered, the backend's Close returns by
// its context's deadline with an error that wraps it and names what is
// still closing; the closing goes on in the background, and a later Close
// waits for it: by its own deadline while the broker still withholds the
// closes, and to the end, returning nil, once the broker answers.
func TestCloseReturnsByItsDeadlineWhileTheBrokerWithholdsTheCloses(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := patientBackend(t, b)
	h := newHandle(t, be, "closing", topic.Options{})
	sub, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := h.Publish(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	release := b.Withhold(pulsartest.CommandCloseProducer, pulsartest.CommandCloseConsumer)
	t.Cleanup(release)
	closing := func(ctx context.Context) error {
		err := be.Close(ctx)
		if err != nil && !strings.HasPrefix(err.Error(), "pulsartopic: closing the backend: its topics") {
			t.Errorf("Close with the closes withheld = %q, want an error naming the backend and what is still closing", err)
		}
		return err
	}
	if !testbroker.ReturnsByDeadline(t, "Close", closing) || !testbroker.ReturnsByDeadline(t, "a later Close", closing) {
		t.FailNow()
	}
	release()
	if err := be.Close(ctxT(t)); err != nil {
		t.Fatalf("closing again once the broker answered = %v, want nil", err)
	}
	if st := b.Stats(); st.ProducersOpen != 0 || st.ConsumersOpen != 0 {
		t.Errorf("after Close: %d producers and %d consumers open, want none", st.ProducersOpen, st.ConsumersOpen)
	}
}

// Guarantee: the backend's topics and their subscribers close together:
// while the broker leaves every close unanswered, the closing ends after
// about two of the client's operation timeouts (a topic's subscribers
// together, then its producer), however many topics and subscribers the
// backend has, not after one timeout for each of them.
func TestTopicsAndSubscribersCloseTogetherWhileTheBrokerWithholdsTheCloses(t *testing.T) {
	const (
		topics    = 4
		subs      = 2
		operation = time.Second
	)
	b := testbroker.Pulsar(t)
	o := testOptions[int](b, topic.IntCodec{})
	o.ClientOptions.OperationTimeout = operation
	o.ClientOptions.KeepAliveInterval = time.Minute
	be := newBackend(t, o)
	for i := range topics {
		h := newHandle(t, be, topic.Name("together-"+strconv.Itoa(i)), topic.Options{})
		for range subs {
			sub, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
		}
		if err := h.Publish(ctxT(t), i); err != nil {
			t.Fatal(err)
		}
	}
	release := b.Withhold(pulsartest.CommandCloseProducer, pulsartest.CommandCloseConsumer)
	t.Cleanup(release)
	start := time.Now()
	if err := be.Close(ctxT(t)); err != nil {
		t.Fatalf("Close = %v, want nil once the client gave up on the closes", err)
	}
	// One after another: topics × (subs + 1) = 12 timeouts. Together: 2,
	// and 6 leave room for a busy machine.
	if took, bound := time.Since(start), 6*operation; took > bound {
		t.Errorf("closing %d topics of %d subscribers each took %v with the closes withheld, want under %v (about two operation timeouts of %v)",
			topics, subs, took.Round(time.Millisecond), bound, operation)
	}
}

// Guarantee: each message of a batch ReceiveBatch hands out is settled by
// its own id: the one message of a batch a member nacks comes back, and
// once the member has acked all the others and that one, the group's
// backlog on the broker is empty.
func TestEveryMessageOfAReceivedBatchIsSettledByItsOwnID(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	h := newHandle(t, be, "t", topic.Options{})
	sub := subscribe(t, h, topic.Balanced("g"))
	const n = 20
	for i := range n {
		if err := h.Publish(ctxT(t), i); err != nil {
			t.Fatal(err)
		}
	}
	// Everything is at the member before it receives, so that its
	// receives return batches.
	wait.Within(t, patience, "every message dispatched", func() bool {
		return b.Consumers(be.TopicName("t"), "g")[0].Dispatched == n
	})
	dst := make([]topic.Item[int], n)
	nacked := -1
	for got := 0; got < n; {
		k, err := sub.ReceiveBatch(ctxT(t), dst)
		if err != nil {
			t.Fatal(err)
		}
		for i, it := range dst[:k] {
			if nacked < 0 && k > 1 && i == k-1 {
				nacked = it.Value
				if err := sub.Nack(it.ID, errors.New("failed")); err != nil {
					t.Fatalf("Nack(%d): %v", it.Value, err)
				}
				continue
			}
			if err := sub.Ack(it.ID); err != nil {
				t.Fatalf("Ack(%d): %v", it.Value, err)
			}
		}
		got += k
	}
	if nacked < 0 {
		t.Fatal("every receive returned a single message; the test needs a batch")
	}
	it, err := sub.Receive(ctxT(t))
	if err != nil || it.Value != nacked || it.Redeliveries != 1 {
		t.Fatalf("after the nack, Receive = %+v, %v; want %d again", it, err, nacked)
	}
	if err := sub.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, patience, "the group's backlog to empty", func() bool { return b.Backlog(be.TopicName("t"), "g") == 0 })
}

// Guarantee: a message received and left unsettled when its subscription
// closes is the broker's to deliver again: settling it afterwards returns
// ErrMessageNotTracked, and the group's next member receives it.
func TestSettlingAfterCloseIsNotTrackedAndTheMessageComesBack(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	h := newHandle(t, be, "t", topic.Options{})
	first := subscribe(t, h, topic.Balanced("g"))
	if err := h.Publish(ctxT(t), 5); err != nil {
		t.Fatal(err)
	}
	it, err := first.Receive(ctxT(t))
	if err != nil || it.Value != 5 {
		t.Fatalf("Receive = %+v, %v; want 5", it, err)
	}
	first.Close()
	if err := first.Ack(it.ID); !errors.Is(err, topic.ErrMessageNotTracked) {
		t.Fatalf("Ack after Close = %v, want ErrMessageNotTracked", err)
	}
	next := subscribe(t, h, topic.Balanced("g"))
	if it, err := next.Receive(ctxT(t)); err != nil || it.Value != 5 {
		t.Fatalf("the next member's Receive = %+v, %v; want 5 again", it, err)
	}
}
