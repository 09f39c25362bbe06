package pulsar_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// A shared subscription spreads a topic over every producer stage's
// consumer, and each message is handled exactly once: nothing lost, nothing
// doubled.
func TestSharedSpreadOverStages(t *testing.T) {
	e := newEnv(t)
	want := e.publish("shared", "m", 3000)
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"shared"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	_, stop := run(t, src, 3, producer.Flow{Initial: 20}, recordAll(r))
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(want) })
	wait.Within(t, waitLimit, "every message acked", func() bool { return e.sumAcked("shared", "sub", 0) == int64(len(want)) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	counts, _ := r.snapshot()
	for _, w := range want {
		if counts[w] != 1 {
			t.Fatalf("%s handled %d times, want exactly once", w, counts[w])
		}
	}
	cs := e.broker.Consumers("shared", "sub")
	if len(cs) != 3 {
		t.Fatalf("want 3 consumers (one per stage), got %d", len(cs))
	}
	for _, c := range cs {
		if c.SubType != "Shared" {
			t.Errorf("consumer %d subscription type %s, want Shared", c.ConsumerID, c.SubType)
		}
		if c.Dispatched == 0 {
			t.Errorf("consumer %d (%s) got no messages: the subscription was not spread", c.ConsumerID, c.Name)
		}
	}
}

// A failed message is nacked and redelivered after NackRedeliveryDelay,
// with its redelivery count raised; a failure with DispositionDiscard is
// acked and never comes back.
func TestNackRedeliveryAndDiscard(t *testing.T) {
	e := newEnv(t)
	want := e.publish("nack", "m", 20)
	var (
		mu       sync.Mutex
		attempts = map[string][]uint32{}
	)
	handle := func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		md, _ := message.MetadataAs[*bpulsar.Metadata](m)
		k := string(m.Data)
		mu.Lock()
		attempts[k] = append(attempts[k], md.RedeliveryCount)
		n := len(attempts[k])
		mu.Unlock()
		switch {
		case k == "m-3" && n == 1:
			return nil, errors.New("transient")
		case k == "m-7":
			m.SetDisposition(acker.DispositionDiscard)
			return nil, errors.New("poison, discard it")
		}
		return m.Data, nil
	}
	co := earliest()
	co.NackRedeliveryDelay = 100 * time.Millisecond
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"nack"}, Subscription: "sub", Consumer: co, Logger: testLogger()})
	_, stop := run(t, src, 1, producer.Flow{}, handle)
	wait.Within(t, waitLimit, "m-3 redelivered", func() bool { mu.Lock(); defer mu.Unlock(); return len(attempts["m-3"]) == 2 })
	wait.Within(t, waitLimit, "every message acked", func() bool { return e.sumAcked("nack", "sub", 0) == int64(len(want)) })
	// Give a wrong redelivery of m-7 a chance to show up.
	time.Sleep(300 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := attempts["m-3"]; len(got) != 2 || got[0] != 0 || got[1] < 1 {
		t.Errorf("m-3 redelivery counts %v, want [0 ≥1]", got)
	}
	if got := attempts["m-7"]; len(got) != 1 {
		t.Errorf("discarded m-7 handled %d times, want 1", len(got))
	}
	for _, w := range want {
		if w != "m-3" && len(attempts[w]) != 1 {
			t.Errorf("%s handled %d times, want 1", w, len(attempts[w]))
		}
	}
	var nacked int64
	for _, c := range e.broker.Consumers("nack", "sub") {
		nacked += c.Nacked
	}
	if nacked < 1 {
		t.Errorf("broker saw %d nacks, want ≥ 1", nacked)
	}
}

// pulsar-client-go's dead-letter policy passes through: a message that keeps
// failing is delivered MaxDeliveries times and then published to the dead
// letter topic and acked on the subscription.
func TestDeadLetterAfterMaxDeliveries(t *testing.T) {
	e := newEnv(t)
	e.publish("work", "m", 5)
	var (
		mu    sync.Mutex
		tries = map[string]int{}
	)
	handle := func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		mu.Lock()
		tries[string(m.Data)]++
		mu.Unlock()
		if string(m.Data) == "m-2" {
			return nil, errors.New("always fails")
		}
		return m.Data, nil
	}
	co := earliest()
	co.NackRedeliveryDelay = 50 * time.Millisecond
	co.DLQ = &pulsar.DLQPolicy{MaxDeliveries: 3, DeadLetterTopic: "work-dlq",
		// No send timeout: its timer goroutine would outlive the producer
		// by up to the timeout, and goleak checks the test leaves none.
		ProducerOptions: pulsar.ProducerOptions{SendTimeout: -1}}
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"work"}, Subscription: "sub", Consumer: co, Logger: testLogger()})
	_, stop := run(t, src, 1, producer.Flow{}, handle)
	// The client's dead-letter producer compresses (LZ4), so read the dead
	// letter topic back with a client consumer rather than raw from the broker.
	dlq, err := e.client.Subscribe(pulsar.ConsumerOptions{Topic: "work-dlq", SubscriptionName: "check", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close()
	rctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	dm, err := dlq.Receive(rctx)
	if err != nil {
		t.Fatalf("nothing in the dead letter topic: %v", err)
	}
	if string(dm.Payload()) != "m-2" {
		t.Errorf("dead letter topic holds %q, want m-2", dm.Payload())
	}
	wait.Within(t, waitLimit, "the subscription backlog to empty", func() bool { return e.broker.Backlog("work", "sub") == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if tries["m-2"] != 3 {
		t.Errorf("poison message handled %d times, want MaxDeliveries = 3", tries["m-2"])
	}
	for _, k := range []string{"m-0", "m-1", "m-3", "m-4"} {
		if tries[k] != 1 {
			t.Errorf("%s handled %d times, want 1", k, tries[k])
		}
	}
	if n := len(e.broker.Messages("work-dlq")); n != 1 {
		t.Errorf("dead letter topic holds %d entries, want 1", n)
	}
}

// Guarantee: stages subscribing at once with RetryEnable and a DLQ policy
// that leaves its topics to the client (which fills them in while it
// subscribes) share no policy value: no data race, every message handled,
// and the application's DLQPolicy stays as it gave it.
func TestRetryEnableStagesLeaveTheDLQPolicyAsGiven(t *testing.T) {
	e := newEnv(t)
	want := e.publish("retry-enabled", "m", 50)
	r := newReceived()
	co := earliest()
	co.RetryEnable = true
	policy := &pulsar.DLQPolicy{MaxDeliveries: 3}
	co.DLQ = policy
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"retry-enabled"}, Subscription: "sub", Consumer: co})
	_, stop := run(t, src, 4, producer.Flow{}, recordAll(r))
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(want) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if policy.DeadLetterTopic != "" || policy.RetryLetterTopic != "" || policy.MaxDeliveries != 3 {
		t.Errorf("the application's DLQ policy was changed to %+v", *policy)
	}
}

// With EnableBatchIndexAcknowledgment, on a broker that honours it, a failed
// message of a batch comes back alone; without either, the siblings the
// pipeline already handled come back with it (the documented warning).
func TestBatchIndexAck(t *testing.T) {
	for _, tc := range []struct{ indexAck, broker bool }{{true, true}, {false, true}, {true, false}, {false, false}} {
		indexAck := tc.indexAck
		// Only a broker that honours batch-index acks (Pulsar's
		// acknowledgmentAtBatchIndexLevelEnabled, off by default in 4.0)
		// brings the failed message back alone.
		t.Run(fmt.Sprintf("batchIndexAck=%t/broker=%t", indexAck, tc.broker), func(t *testing.T) {
			e := newEnvWith(t, pulsartest.Options{BatchIndexAck: tc.broker})
			msgs := make([]pulsartest.Message, 10)
			for i := range msgs {
				msgs[i] = pulsartest.Message{Payload: fmt.Appendf(nil, "b-%d", i)}
			}
			if _, err := e.broker.PublishBatch(context.Background(), "batch", msgs...); err != nil {
				t.Fatal(err)
			}
			var (
				mu    sync.Mutex
				tries = map[string]int{}
				total int
			)
			handle := func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				mu.Lock()
				tries[string(m.Data)]++
				total++
				n := tries[string(m.Data)]
				mu.Unlock()
				if string(m.Data) == "b-4" && n == 1 {
					return nil, errors.New("fail once")
				}
				return m.Data, nil
			}
			co := earliest()
			// Acks go out at once (not grouped for up to 100ms), so the
			// siblings' acks reach the broker well before the redelivery.
			co.AckGroupingOptions = &pulsar.AckGroupingOptions{MaxSize: 1}
			co.NackRedeliveryDelay = 300 * time.Millisecond
			co.EnableBatchIndexAcknowledgment = indexAck
			src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"batch"}, Subscription: "sub", Consumer: co, Logger: testLogger()})
			_, stop := run(t, src, 1, producer.Flow{}, handle)
			wait.Within(t, waitLimit, "b-4 handled again", func() bool { mu.Lock(); defer mu.Unlock(); return tries["b-4"] >= 2 })
			wait.Within(t, waitLimit, "the backlog to empty", func() bool { return e.broker.Backlog("batch", "sub") == 0 })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if indexAck && tc.broker {
				if total != 11 {
					t.Errorf("handled %d messages (%v), want 11: only the failed one again", total, tries)
				}
			} else if total < 20 {
				t.Errorf("handled %d messages (%v), want the whole batch again (≥ 20)", total, tries)
			}
		})
	}
}
