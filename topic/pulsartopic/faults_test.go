package pulsartopic_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// faultPatience bounds the fault tests' waits for what must happen.
const faultPatience = testbroker.PulsarFaultPatience

// faultTopic makes a backend on b and its topic name on it.
func faultTopic(t *testing.T, b *pulsartest.Broker, name topic.Name) (*pulsartopic.Backend[int], *topic.Handle[int]) {
	t.Helper()
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	return be, newHandle(t, be, name, topic.Options{})
}

// consume receives from s until ctx ends, acking each message and
// counting in led those whose ack returned nil; seen (if not nil) is told
// of every value received.
func consume(ctx context.Context, t *testing.T, s *topic.Subscription[int], led *testbroker.Ledger, seen func(int)) {
	for {
		it, err := s.Receive(ctx)
		if err != nil {
			return
		}
		if seen != nil {
			seen(it.Value)
		}
		if err := s.Ack(it.ID); err != nil {
			t.Errorf("Ack(%d): %v", it.Value, err)
			continue
		}
		led.Handle(it.Value)
	}
}

// consuming runs consume on each of subs until the test's cleanup.
func consuming(t *testing.T, led *testbroker.Ledger, seen func(int), subs ...*topic.Subscription[int]) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Go(func() { consume(ctx, t, s, led, seen) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// allAcked waits until every publish of led that returned nil was
// handled and the group's backlog on full is empty: nothing is left
// unacked at the broker. n is the test's message count, which the wait
// grows with (testbroker.FaultPatience).
func allAcked(t *testing.T, b *pulsartest.Broker, led *testbroker.Ledger, n int, full, group string) {
	t.Helper()
	wait.Within(t, testbroker.FaultPatience(faultPatience, n), "every message handled and the group's backlog empty", func() bool {
		return len(led.Unhandled()) == 0 && b.Backlog(full, group) == 0
	}, func() string {
		return fmt.Sprintf("never handled: %v; backlog %d", led.Unhandled(), b.Backlog(full, group))
	})
}

func decodeInt(p []byte) (int, error) { return topic.IntCodec{}.Decode(p) }

// Guarantee: while the broker drops every connection, withholds send
// receipts and then releases them, or withholds them and drops the
// connections, every Publish that returned nil is stored and delivered
// to the group at least once, and every message missing from the topic
// was reported failed.
func TestAPublishThatReturnedNilIsDeliveredThroughDroppedConnectionsAndWithheldReceipts(t *testing.T) {
	b := testbroker.Pulsar(t)
	be, h := faultTopic(t, b, "lossy-publish")
	led := testbroker.NewLedger()
	consuming(t, led, nil, subscribe(t, h, topic.Balanced("g")))
	n := testbroker.PulsarFaultCount(t)
	testbroker.PublishThroughPulsarFaults(t, b, be.TopicName("lossy-publish"), n,
		func(ctx context.Context, v int) error { return h.Publish(ctx, v) }, decodeInt)
	allAcked(t, b, led, n, be.TopicName("lossy-publish"), "g")
}

// Guarantee: acks the broker never recorded (withheld, then their
// connection dropped) lose nothing: the messages come again after the
// reconnection, as do those received and not yet acked, until every
// message is acked at the broker.
func TestAcksTheBrokerNeverRecordedDeliverTheirMessagesAgain(t *testing.T) {
	b := testbroker.Pulsar(t)
	be, h := faultTopic(t, b, "lossy-ack")
	full := be.TopicName("lossy-ack")
	a := subscribe(t, h, topic.Balanced("g"))
	n := testbroker.PulsarFaultCount(t)
	led := testbroker.NewLedger()
	testbroker.PublishRange(led, 0, n, func(v int) error { return h.Publish(ctxT(t), v) }, nil)
	if p, _ := led.Counts(); p != n {
		t.Fatalf("%d of %d publishes returned nil", p, n)
	}
	// a acks the first third at the broker, then acks up to a third more
	// (but every fifth message) while the broker withholds the acks: no
	// more than its read-ahead, as the permits it asks for wait behind
	// the acks withheld.
	take(t, a, led, n/3, nil)
	wait.Within(t, faultPatience, "the first third acked at the broker", func() bool { return b.Backlog(full, "g") == int64(n-n/3) })
	release := b.Withhold(pulsartest.CommandAck)
	t.Cleanup(release)
	take(t, a, led, min(n/3, 500), func(_, v int) bool { return v%5 == 0 })
	wait.Within(t, faultPatience, "an ack withheld", func() bool { return b.Stats().Withheld > 0 })
	before := b.Stats()
	b.DropConnections()
	release()
	var again atomic.Int64
	consuming(t, led, func(v int) {
		if led.Handled(v) {
			again.Add(1)
		}
	}, a)
	allAcked(t, b, led, n, full, "g")
	testbroker.PulsarReopened(t, b, before)
	if again.Load() == 0 {
		t.Errorf("no message whose ack was withheld came again")
	}
	t.Logf("%d handled messages delivered again", again.Load())
}

// take receives k messages of s and acks them (counted in led), but
// those hold (if not nil) is true for, given the message's rank and
// value, which it returns unacked.
func take(t *testing.T, s *topic.Subscription[int], led *testbroker.Ledger, k int, hold func(i, v int) bool) []topic.Item[int] {
	t.Helper()
	var held []topic.Item[int]
	for i := range k {
		it, err := s.Receive(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if hold != nil && hold(i, it.Value) {
			held = append(held, it)
			continue
		}
		if err := s.Ack(it.ID); err != nil {
			t.Fatalf("Ack(%d): %v", it.Value, err)
		}
		led.Handle(it.Value)
	}
	return held
}

// lastFive holds the last five of k messages.
func lastFive(k int) func(i, v int) bool { return func(i, _ int) bool { return i >= k-5 } }

// Guarantee: a member that leaves its Shared group while it holds
// unacked messages (and its read-ahead), and a member that joins while
// another holds unacked ones, lose nothing: the leaver's late acks are
// refused, and every message is acked by some member.
func TestMembersLeavingAndJoiningASharedGroupLoseNoMessage(t *testing.T) {
	b := testbroker.Pulsar(t)
	be, h := faultTopic(t, b, "lossy-members")
	a := subscribe(t, h, topic.Balanced("g"))
	c := subscribe(t, h, topic.Balanced("g"))
	n := testbroker.PulsarFaultCount(t)
	led := testbroker.NewLedger()
	testbroker.PublishRange(led, 0, n, func(v int) error { return h.Publish(ctxT(t), v) }, nil)

	heldA := take(t, a, led, n/5, lastFive(n/5))
	heldC := take(t, c, led, n/5, lastFive(n/5))
	a.Close() // leaves with five messages in flight, and its read-ahead
	for _, it := range heldA {
		if err := a.Ack(it.ID); !errors.Is(err, topic.ErrMessageNotTracked) {
			t.Errorf("Ack(%d) after the member left = %v, want ErrMessageNotTracked", it.Value, err)
		}
	}
	d := subscribe(t, h, topic.Balanced("g")) // joins while c holds five
	for _, it := range heldC {
		if err := c.Ack(it.ID); err != nil {
			t.Fatalf("Ack(%d) after a member joined: %v", it.Value, err)
		}
		led.Handle(it.Value)
	}
	consuming(t, led, nil, c, d)
	allAcked(t, b, led, n, be.TopicName("lossy-members"), "g")
}

// Guarantee: a topic unloaded while messages are published and consumed
// loses nothing: its producer and consumers come back, every publish
// returns nil, and every message is acked by the group. (With the race
// detector the messages are published through the broker's API, see
// testbroker.RaceDetector.)
func TestAnUnloadedTopicLosesNothingAndResumes(t *testing.T) {
	b := testbroker.Pulsar(t)
	be, h := faultTopic(t, b, "lossy-unload")
	full := be.TopicName("lossy-unload")
	led := testbroker.NewLedger()
	consuming(t, led, nil, subscribe(t, h, topic.Balanced("g")), subscribe(t, h, topic.Balanced("g")))
	n := testbroker.PulsarFaultCount(t)
	publish := testbroker.PulsarPublisher(b, full, topic.IntCodec{}.Encode, func(v int) error { return h.Publish(ctxT(t), v) })
	var wg sync.WaitGroup
	wg.Go(func() { testbroker.PublishRange(led, 0, n, publish, nil) })
	before := b.Stats()
	unloads := 0
	for _, at := range []int{n / 4, n / 2} {
		wait.Within(t, testbroker.FaultPatience(faultPatience, n), "publishes", func() bool { p, f := led.Counts(); return p+f >= at })
		if err := b.Unload(full); err != nil {
			t.Fatal(err)
		}
		unloads++
	}
	wg.Wait()
	if p, f := led.Counts(); p != n {
		t.Errorf("%d publishes returned nil and %d failed across %d unloads, want every one nil", p, f, unloads)
	}
	allAcked(t, b, led, n, full, "g")
	testbroker.PulsarReopened(t, b, before)
}

// Guarantee: Options.SendTimeout bounds a publish's wait for the broker's
// receipt: against a broker that never answers the send, Publish fails
// with an error wrapping pulsar.ErrSendTimeout once it has passed, though
// its context would let it wait longer.
func TestAPublishFailsOnceItsSendTimeoutPassesWithoutAReceipt(t *testing.T) {
	const sendTimeout = 300 * time.Millisecond
	b := testbroker.Pulsar(t)
	o := testOptions[int](b, topic.IntCodec{})
	o.SendTimeout = sendTimeout
	be := newBackend(t, o)
	h := newHandle(t, be, "held", topic.Options{})
	release := b.Withhold(pulsartest.CommandSend)
	t.Cleanup(release) // before the topic's Close, which waits for the receipt
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	start := time.Now()
	err := h.Publish(ctx, 1)
	if !errors.Is(err, pulsar.ErrSendTimeout) {
		t.Fatalf("Publish with the receipt withheld = %v after %v, want an error wrapping pulsar.ErrSendTimeout", err, time.Since(start))
	}
	if waited := time.Since(start); waited < sendTimeout {
		t.Fatalf("Publish failed after %v, before its send timeout %v", waited, sendTimeout)
	}
}
