package pulsartest

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// setSizeQuota sets public/default's destination_storage quota to limit
// bytes with policy, through b's admin REST API.
func setSizeQuota(t *testing.T, b *Broker, limit int, policy string) {
	t.Helper()
	setQuota(t, b, QuotaDestinationStorage, `{"limitSize":`+strconv.Itoa(limit)+`,"limitTime":-1,"policy":"`+policy+`"}`)
}

// setAgeQuota sets public/default's message_age quota to limit seconds
// with policy, through b's admin REST API.
func setAgeQuota(t *testing.T, b *Broker, limit int, policy string) {
	t.Helper()
	setQuota(t, b, QuotaMessageAge, `{"limitSize":-1,"limitTime":`+strconv.Itoa(limit)+`,"policy":"`+policy+`"}`)
}

// setQuota sets public/default's backlog quota of type kind to the
// BacklogQuota body, through b's admin REST API.
func setQuota(t *testing.T, b *Broker, kind, body string) {
	t.Helper()
	srv := httptest.NewServer(b.AdminHandler())
	defer srv.Close()
	if code, out := adminDo(t, srv, http.MethodPost, "/admin/v2/namespaces/public/default/backlogQuota?backlogQuotaType="+kind, body); code != http.StatusNoContent {
		t.Fatalf("setting the backlog quota: %d %s", code, out)
	}
}

// overQuota subscribes sub "slow" on topic through a client of its own
// (acknowledging with receipts), then sends three messages of 300 bytes
// (and their metadata) with a new producer of c, the last past a
// 1000-byte quota; it returns the consumer, the producer and how many
// were sent.
func overQuota(t *testing.T, b *Broker, c pulsar.Client, topic string, opts pulsar.ProducerOptions) (pulsar.Consumer, pulsar.Producer, int) {
	t.Helper()
	ctx := ctxT(t)
	cons, err := newClient(t, b).Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow", Type: pulsar.Shared, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	opts.Topic, opts.DisableBatching = topic, true
	p, err := c.CreateProducer(opts)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(strings.Repeat("x", 300))
	for range 3 {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: payload}); err != nil {
			t.Fatalf("Send under the quota: %v", err)
		}
	}
	return cons, p, 3
}

// ackAll receives and acknowledges n messages on cons.
func ackAll(t *testing.T, cons pulsar.Consumer, n int) {
	t.Helper()
	for range n {
		m := receive(t, ctxT(t), cons)
		if err := cons.Ack(m); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
}

// refusedUntilAcked checks that creating a producer on topic fails with
// an error naming code, and that once cons acknowledges the sent messages
// a new producer is created and sends to cons.
func refusedUntilAcked(t *testing.T, c pulsar.Client, cons pulsar.Consumer, topic string, sent int, code string) {
	t.Helper()
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil || !strings.Contains(err.Error(), code) {
		t.Fatalf("CreateProducer over the quota: %v, want %s", err, code)
	}
	ackAll(t, cons, sent)
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatalf("CreateProducer once the backlog is acknowledged: %v", err)
	}
	defer p.Close()
	ctx := ctxT(t)
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("again")}); err != nil {
		t.Fatalf("Send once the backlog is acknowledged: %v", err)
	}
	if m := receive(t, ctx, cons); string(m.Payload()) != "again" {
		t.Errorf("received %q after the quota cleared, want %q", m.Payload(), "again")
	}
}

// (The producer the broker closed is closed by the tests before the
// quota clears: pulsar-client-go (v0.21.0) races with itself when a
// producer reconnects after it sent.)

// Guarantee: over a producer_exception destination_storage quota (the
// slowest subscription's backlog bytes), the broker closes the topic's
// producers and refuses new ones with ProducerBlockedQuotaExceededException,
// so pulsar-client-go fails a send with ErrProducerBlockedQuotaExceeded
// and producer creation with an error naming the code; once the backlog
// is acknowledged under the quota, producers are accepted again.
func TestProducerExceptionQuotaFailsSendsUntilTheBacklogIsAcked(t *testing.T) {
	b := startBroker(t)
	setSizeQuota(t, b, 1000, "producer_exception")
	c := newClient(t, b)
	topic := uniqueTopic(t)
	cons, p, sent := overQuota(t, b, c, topic, pulsar.ProducerOptions{})
	ctx := ctxT(t)

	_, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("over")})
	p.Close()
	if !errors.Is(err, pulsar.ErrProducerBlockedQuotaExceeded) {
		t.Fatalf("Send over the quota: %v, want ErrProducerBlockedQuotaExceeded", err)
	}
	refusedUntilAcked(t, c, cons, topic, sent, "ProducerBlockedQuotaExceededException")
}

// Guarantee: over a producer_request_hold destination_storage quota, the
// broker closes the topic's producers and refuses new ones with
// ProducerBlockedQuotaExceededError, on which pulsar-client-go holds a
// send (until its send timeout) instead of failing it; once the backlog
// is acknowledged under the quota, producers are accepted again.
func TestProducerRequestHoldQuotaHoldsSendsUntilTheBacklogIsAcked(t *testing.T) {
	b := startBroker(t)
	setSizeQuota(t, b, 1000, "producer_request_hold")
	c := newClient(t, b)
	topic := uniqueTopic(t)
	cons, p, sent := overQuota(t, b, c, topic, pulsar.ProducerOptions{SendTimeout: 500 * time.Millisecond})
	ctx := ctxT(t)

	_, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("held")})
	p.Close()
	if !errors.Is(err, pulsar.ErrSendTimeout) {
		t.Fatalf("Send over the quota: %v, want it held until ErrSendTimeout", err)
	}
	if got := b.Backlog(topic, "slow"); got != int64(sent) {
		t.Errorf("backlog over the quota: %d, want the %d messages sent before", got, sent)
	}
	refusedUntilAcked(t, c, cons, topic, sent, "ProducerBlockedQuotaExceededError")
}

// Guarantee: over a consumer_backlog_eviction destination_storage quota,
// the broker skips the oldest messages of a subscription until its
// backlog is under 90% of the quota, and never refuses the producer.
func TestConsumerBacklogEvictionQuotaDropsTheOldestMessages(t *testing.T) {
	b := startBroker(t)
	setSizeQuota(t, b, 1000, "consumer_backlog_eviction")
	c := newClient(t, b)
	topic := uniqueTopic(t)
	ctx := ctxT(t)
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 10 {
		msg := strconv.Itoa(i) + strings.Repeat("x", 300)
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(msg)}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	if got := b.Backlog(topic, "slow"); got < 1 || got > 2 {
		t.Fatalf("backlog after eviction: %d messages, want 1 or 2 (under 900 bytes)", got)
	}
	cons, err = c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var last string
	for range b.Backlog(topic, "slow") {
		last = string(receive(t, ctx, cons).Payload())
	}
	if !strings.HasPrefix(last, "9") {
		t.Errorf("newest message kept: %.3q, want message 9", last)
	}
}

// Guarantee: without a quota, or on another namespace, a backlog of any
// size changes nothing for producers.
func TestSizeQuotaAppliesOnlyToItsNamespace(t *testing.T) {
	b := startBroker(t)
	srv := httptest.NewServer(b.AdminHandler())
	defer srv.Close()
	if code, out := adminDo(t, srv, http.MethodPost, "/admin/v2/namespaces/public/other/backlogQuota", `{"limitSize":10,"limitTime":-1,"policy":"producer_exception"}`); code != http.StatusNoContent {
		t.Fatalf("setting the backlog quota: %d %s", code, out)
	}
	c := newClient(t, b)
	topic := uniqueTopic(t)
	_, p, _ := overQuota(t, b, c, topic, pulsar.ProducerOptions{})
	defer p.Close()
	if _, err := p.Send(ctxT(t), &pulsar.ProducerMessage{Payload: []byte("more")}); err != nil {
		t.Fatalf("Send on a namespace without a quota: %v", err)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatalf("CreateProducer on a namespace without a quota: %v", err)
	}
	p.Close()
}

// Guarantee: over a consumer_backlog_eviction message_age quota (the
// oldest unacknowledged message of the slowest durable subscription older
// than the limit), the broker acknowledges the messages published more
// than 90% of the limit ago, and keeps the younger ones: on a publish, and
// when CheckBacklogQuotas runs with the broker's clock moved ahead.
func TestConsumerBacklogEvictionAgeQuotaDropsMessagesOlderThanTheLimit(t *testing.T) {
	b := startBroker(t)
	setAgeQuota(t, b, 600, "consumer_backlog_eviction")
	c := newClient(t, b)
	topic := uniqueTopic(t)
	ctx := ctxT(t)
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	cons.Close()
	now := time.Now()
	for _, age := range []int{700, 550, 500} {
		msg := Message{Payload: []byte("age " + strconv.Itoa(age)), PublishTime: now.Add(-time.Duration(age) * time.Second)}
		if _, err := b.Publish(ctx, topic, msg); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.Backlog(topic, "slow"); got != 2 {
		t.Fatalf("backlog after publishing messages 700 s, 550 s and 500 s old: %d, want 2 (the one over the 600 s limit dropped)", got)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("young")}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got := b.Backlog(topic, "slow"); got != 3 {
		t.Fatalf("backlog with every message under the limit: %d, want 3", got)
	}
	b.SetClock(func() time.Time { return time.Now().Add(time.Minute) })
	b.CheckBacklogQuotas()
	if got := b.Backlog(topic, "slow"); got != 1 {
		t.Fatalf("backlog a minute later: %d, want 1 (the messages 610 s and 560 s old dropped, over 90%% of the limit)", got)
	}
	cons, err = c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if m := receive(t, ctx, cons); string(m.Payload()) != "young" {
		t.Errorf("message kept: %q, want %q", m.Payload(), "young")
	}
}

// Guarantee: over a producer_exception message_age quota, the broker
// closes the topic's producers and refuses new ones with
// ProducerBlockedQuotaExceededException until the old message is
// acknowledged.
func TestProducerExceptionAgeQuotaRefusesProducersUntilTheOldMessageIsAcked(t *testing.T) {
	b := startBroker(t)
	setAgeQuota(t, b, 600, "producer_exception")
	c := newClient(t, b)
	topic := uniqueTopic(t)
	ctx := ctxT(t)
	cons, err := newClient(t, b).Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow", Type: pulsar.Shared, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("old")}); err != nil {
		t.Fatalf("Send under the quota: %v", err)
	}
	b.CheckBacklogQuotas()
	if got := b.Stats().ProducersOpen; got != 1 {
		t.Fatalf("producers open with the message under the limit: %d, want 1", got)
	}
	b.SetClock(func() time.Time { return time.Now().Add(11 * time.Minute) })
	b.CheckBacklogQuotas()
	if got := b.Stats().ProducersOpen; got != 0 {
		t.Fatalf("producers open with the message over the limit: %d, want 0 (closed)", got)
	}
	p.Close()
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil || !strings.Contains(err.Error(), "ProducerBlockedQuotaExceededException") {
		t.Fatalf("CreateProducer over the quota: %v, want ProducerBlockedQuotaExceededException", err)
	}
	ackAll(t, cons, 1)
	p2, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatalf("CreateProducer once the old message is acknowledged: %v", err)
	}
	p2.Close()
}
