package pulsartopic_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// overQuotaHandle returns a handle of topic "quota" whose balanced group
// "g" has a backlog over a 1000-byte quota with policy.
func overQuotaHandle(t *testing.T, policy string) *topic.Handle[int] {
	t.Helper()
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	h := newHandle(t, be, "quota", topic.Options{})
	subscribe(t, h, topic.Balanced("g"))
	testbroker.PulsarSizeQuota(t, b, 1000, policy)
	if _, err := b.Publish(ctxT(t), be.TopicName("quota"), pulsartest.Message{Payload: []byte(strings.Repeat("x", 2000))}); err != nil {
		t.Fatal(err)
	}
	return h
}

// Guarantee: a Publish to a topic over a producer_exception backlog quota
// fails with a *pulsartopic.Error naming the topic that matches
// pulsar.ErrProducerBlockedQuotaExceeded.
func TestPublishOverAProducerExceptionQuotaFailsWithAMatchableError(t *testing.T) {
	h := overQuotaHandle(t, "producer_exception")
	err := h.Publish(ctxT(t), 1)
	var pe *pulsartopic.Error
	if !errors.Is(err, pulsar.ErrProducerBlockedQuotaExceeded) || !errors.As(err, &pe) || !strings.Contains(pe.Topic, "quota") {
		t.Fatalf("Publish over the quota = %v, want a *pulsartopic.Error on the topic matching pulsar.ErrProducerBlockedQuotaExceeded", err)
	}
}

// Guarantee: a Publish to a topic over a producer_request_hold backlog
// quota, which the client holds, returns by its context's deadline with
// context.DeadlineExceeded.
func TestPublishOverAProducerRequestHoldQuotaReturnsByItsDeadline(t *testing.T) {
	h := overQuotaHandle(t, "producer_request_hold")
	const within = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(ctxT(t), within)
	defer cancel()
	began := time.Now()
	err := h.Publish(ctx, 1)
	if took := time.Since(began); took > within+2*time.Second {
		t.Errorf("Publish over the quota took %v, want it ended by its %v deadline", took, within)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish over the quota = %v, want context.DeadlineExceeded", err)
	}
}
