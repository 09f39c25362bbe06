package kafkatopic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a balanced Subscribe that fails leaves its group uncounted:
// a BalancedOnly topic is not bound to the group of a subscription that
// was never made, so that a Subscribe to another group then succeeds.
func TestAFailedSubscribeLeavesTheTopicUnboundToItsGroup(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, testOptions(c, topic.IntCodec{}))
	h := newTopic(t, b, "bound", topic.Options{Mode: topic.BalancedOnly})
	// The first request for the group's committed offsets is held until
	// the Subscribe has failed.
	release := make(chan struct{})
	c.ControlKey(int16(kmsg.OffsetFetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		<-release
		return nil, nil, false
	})
	short, cancel := context.WithTimeout(ctxT(t), 500*time.Millisecond)
	defer cancel()
	_, err := h.Subscribe(short, topic.Balanced("first"), topic.SubscriberOptions{})
	close(release)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Subscribe with its offsets request held past its deadline = %v, want an error wrapping context.DeadlineExceeded", err)
	}
	if n := h.Stats().BalancedGroups; n != 0 {
		t.Errorf("after the failed Subscribe the topic counts %d groups, want 0", n)
	}
	s, err := h.Subscribe(ctxT(t), topic.Balanced("second"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatalf("Subscribe to another group after the failed one = %v, want a subscription", err)
	}
	s.Close()
}

// Guarantee: a BalancedOnly topic stays bound to the group of a
// subscription that was made, after that subscription closes: a Subscribe
// to another group is refused with ErrSubscribeSingleGroupViolation.
func TestABalancedOnlyTopicStaysBoundToItsGroupOnceItsMembersLeave(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, testOptions(c, topic.IntCodec{}))
	h := newTopic(t, b, "bound", topic.Options{Mode: topic.BalancedOnly})
	s, err := h.Subscribe(ctxT(t), topic.Balanced("first"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	second, err := h.Subscribe(ctxT(t), topic.Balanced("second"), topic.SubscriberOptions{})
	if err == nil {
		second.Close()
	}
	if !errors.Is(err, topic.ErrSubscribeSingleGroupViolation) {
		t.Fatalf("Subscribe to another group once the first group's member left = %v, want ErrSubscribeSingleGroupViolation", err)
	}
}
