package kafkatopic_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/validate"
)

// nackOne makes topic name on a cluster of its own, with NackRedeliveryDelay
// delay (0: the default), subscribes a member of group g, publishes 1, and
// has the member receive it and nack it. It returns the topic, the member
// and when the nack was made.
func nackOne(t *testing.T, name topic.Name, delay time.Duration) (*topic.Handle[int], *topic.Subscription[int], time.Time) {
	t.Helper()
	o := testOptions(testbroker.Kafka(t), topic.IntCodec{})
	o.NackRedeliveryDelay = delay
	h := newTopic(t, newBackend(t, o), name, topic.Options{})
	m := subscribe(t, h, topic.Balanced("g"))
	if err := h.Publish(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	it := recv(t, m)
	nacked := time.Now()
	if err := m.Nack(it.ID, errors.New("handler failed")); err != nil {
		t.Fatalf("Nack: %v", err)
	}
	return h, m, nacked
}

// A message a balanced member nacks on every delivery comes back once per
// NackRedeliveryDelay, not as fast as the member can nack it, and the
// member receives what was published after it meanwhile: the nacked
// message, never acked, does not hold its partition back.
func TestANackedMessageComesBackAfterTheNackRedeliveryDelay(t *testing.T) {
	const delay = 300 * time.Millisecond
	h, m, nacked := nackOne(t, "nack-delay", delay)
	if err := h.Publish(ctxT(t), 2); err != nil {
		t.Fatal(err)
	}
	// 2 usually comes first; a stall of the test longer than the delay
	// before 2 is fetched lets 1 come back before it, which is as good:
	// 1 is never acked, so 2 comes only past the nacked message.
	deadline := time.Now().Add(patience)
	got2, again := false, 0
	for !got2 || again < 3 {
		if !got2 && time.Now().After(deadline) {
			t.Fatalf("2 not received within %v while the nacked 1 came back %d times", patience, again)
		}
		it := recv(t, m)
		switch {
		case it.Value == 2 && !got2:
			got2 = true
			if err := m.Ack(it.ID); err != nil {
				t.Fatalf("Ack: %v", err)
			}
			continue
		case it.Value != 1:
			t.Fatalf("received %d, want the nacked 1 (2 received: %v)", it.Value, got2)
		}
		again++
		if waited := time.Since(nacked); waited < delay {
			t.Fatalf("delivery %d of the nacked message came %v after its nack, before the delay of %v", again+1, waited, delay)
		}
		nacked = time.Now()
		if err := m.Nack(it.ID, errors.New("handler failed")); err != nil {
			t.Fatalf("Nack: %v", err)
		}
	}
}

// Without NackRedeliveryDelay, a nacked message waits
// DefaultNackRedeliveryDelay (1s) before it comes back.
func TestANackedMessageWaitsTheDefaultDelay(t *testing.T) {
	if d := (kafkatopic.Options[int]{}).WithDefaults().NackRedeliveryDelay; d != time.Second {
		t.Fatalf("default NackRedeliveryDelay %v, want %v", d, time.Second)
	}
	_, m, nacked := nackOne(t, "nack-default", 0)
	recv(t, m)
	if waited := time.Since(nacked); waited < kafkatopic.DefaultNackRedeliveryDelay {
		t.Fatalf("the nacked message came back %v after its nack, before the default delay of %v", waited, kafkatopic.DefaultNackRedeliveryDelay)
	}
}

// A member that closes while a nacked message waits for its delay leaves
// it to the group: the next member receives it.
func TestANackedMessageWaitingForItsDelayGoesToTheNextMemberWhenItsMemberCloses(t *testing.T) {
	h, m, _ := nackOne(t, "nack-close", time.Hour)
	m.Close()
	m2 := subscribe(t, h, topic.Balanced("g"))
	if it := recv(t, m2); it.Value != 1 {
		t.Fatalf("the next member received %d, want the nacked 1", it.Value)
	}
}

// A rebalance that takes the partition of a nacked message waiting for its
// delay leaves that message to the partition's next claim: it is received
// once, not once from the wait and again from the log.
func TestANackedMessageWaitingForItsDelayIsReceivedOnceAcrossARebalance(t *testing.T) {
	const delay = 500 * time.Millisecond
	h, a, _ := nackOne(t, "nack-rebalance", delay)
	b := subscribe(t, h, topic.Balanced("g")) // the group rebalances: every claim is released
	receivedOnce(t, a, b, delay)
}

// receivedOnce has a and b, members of one group, receive and ack, and
// checks that the one message nacked comes back to one of them, once: a
// second delivery, from the nack's wait, would come within delay of the
// nack, so it waits twice that after the first (a check that something
// does not happen).
func receivedOnce(t *testing.T, a, b *topic.Subscription[int], delay time.Duration) {
	t.Helper()
	got := make(chan string, 4)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for name, s := range map[string]*topic.Subscription[int]{"a": a, "b": b} {
		wg.Go(func() {
			for {
				it, err := s.Receive(ctx)
				if err != nil {
					return
				}
				_ = s.Ack(it.ID)
				got <- name
			}
		})
	}
	var first string
	select {
	case first = <-got:
	case <-time.After(patience):
		t.Fatal("the nacked message never came back")
	}
	select {
	case again := <-got:
		t.Errorf("the nacked message was received by %s and again by %s", first, again)
	case <-time.After(2 * delay):
	}
}

// A NackRedeliveryDelay set below 1ms is refused, naming the field.
func TestANackRedeliveryDelayBelowAMillisecondIsRefused(t *testing.T) {
	o := kafkatopic.Options[int]{Brokers: []string{"127.0.0.1:9092"}, Codec: topic.IntCodec{}, NackRedeliveryDelay: time.Microsecond}
	var es validate.Errors
	if err := o.Validate(); !errors.As(err, &es) || !es.Has("nack_redelivery_delay", "gte") {
		t.Fatalf("Validate = %v, want a gte error on nack_redelivery_delay", err)
	}
}

// A member counts the deliveries of a message it nacked: each delivery
// carries how many came before it without an ack (Item.Redeliveries), so
// that a subscriber can give up on a message that keeps failing, and a
// message delivered for the first time carries 0.
func TestANackedMessageCarriesItsRedeliveryCount(t *testing.T) {
	h, m, _ := nackOne(t, "nack-count", 5*time.Millisecond)
	for want := uint32(1); want <= 3; want++ {
		it := recv(t, m)
		if it.Value != 1 || it.Redeliveries != want {
			t.Fatalf("received %d with Redeliveries %d, want the nacked 1 with %d", it.Value, it.Redeliveries, want)
		}
		if want < 3 {
			if err := m.Nack(it.ID, errors.New("handler failed")); err != nil {
				t.Fatalf("Nack: %v", err)
			}
		} else if err := m.Ack(it.ID); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
	if err := h.Publish(ctxT(t), 2); err != nil {
		t.Fatal(err)
	}
	if it := recv(t, m); it.Value != 2 || it.Redeliveries != 0 {
		t.Fatalf("received %d with Redeliveries %d, want 2 delivered for the first time (0)", it.Value, it.Redeliveries)
	}
}

// A message nacked while the rebalance that takes its partition waits for
// it (in OnRelease) is left to the partition's next claim: the member that
// let the partition go does not receive it again once its delay has
// passed, so it is received once, not once from the wait and again from
// the log.
func TestAMessageNackedWhileItsPartitionIsReleasedIsReceivedOnce(t *testing.T) {
	const delay = 250 * time.Millisecond
	o := testOptions(testbroker.Kafka(t), topic.IntCodec{})
	o.NackRedeliveryDelay = delay
	h := newTopic(t, newBackend(t, o), "nack-release", topic.Options{})
	releasing := make(chan struct{}, 1)
	a, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{OnRelease: func() func() {
		select {
		case releasing <- struct{}{}:
		default:
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := h.Publish(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	held := recv(t, a)
	type subscribed struct {
		s   *topic.Subscription[int]
		err error
	}
	joined := make(chan subscribed, 1)
	go func() { // returns once the rebalance is over, which waits for a
		s, err := h.Subscribe(ctxT(t), topic.Balanced("g"), topic.SubscriberOptions{})
		joined <- subscribed{s, err}
	}()
	select {
	case <-releasing:
	case <-time.After(patience):
		t.Fatal("the rebalance never waited for the message a holds")
	}
	if err := a.Nack(held.ID, errors.New("handler failed")); err != nil {
		t.Fatalf("Nack while the partition is released: %v", err)
	}
	j := <-joined
	if j.err != nil {
		t.Fatal(j.err)
	}
	t.Cleanup(j.s.Close)
	receivedOnce(t, a, j.s, delay)
}
