package observe_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: boulevard_topic_published_total never goes down, as a
// Prometheus counter must (a decrease reads as a reset, and rate() then
// counts the whole counter again): a publish that topic.Stats counted
// while it waited for room and then took back, because its context ended,
// leaves the exported counter where it was.
func TestTopicPublishedCounterNeverDecreases(t *testing.T) {
	h := memTopic(t, "orders", topic.Options{Balanced: topic.BalancedPolicy{Capacity: 1}})
	if _, err := h.Subscribe(t.Context(), topic.Balanced("billing"), topic.SubscriberOptions{}); err != nil {
		t.Fatal(err)
	}
	obs := observe.New(observe.Options{})
	if err := obs.AddTopic("orders", h); err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, obs)
	published := func() float64 {
		v, ok := find(t, reg, "boulevard_topic_published_total", map[string]string{"topic": "orders"})
		if !ok {
			t.Fatal("boulevard_topic_published_total{topic=\"orders\"} is not exported")
		}
		return v
	}

	if err := h.Publish(t.Context(), 1); err != nil { // fills the group's queue
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.Publish(ctx, 2) }() // waits for room
	var seen float64
	wait.For(t, "the waiting publish counted in boulevard_topic_published_total", func() bool {
		seen = published()
		return seen == 2
	})
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the waiting publish returned %v, want context.Canceled", err)
		}
	case <-time.After(wait.Deadline):
		t.Fatalf("the waiting publish did not return within %v of its context's end", wait.Deadline)
	}
	if got := h.Stats().Published; got != 1 {
		t.Fatalf("topic.Stats().Published = %d after the cancelled publish, want 1 (it takes the publish back)", got)
	}
	if got := published(); got < seen {
		t.Fatalf("boulevard_topic_published_total went down from %v to %v", seen, got)
	}
}

// Guarantee: the links of topics that come and go do not pile up: linking
// a topic with no publishers and no subscribers forgets its links, so
// /stats names only the topics still linked.
func TestLinkingATopicToNoPipelineForgetsItsLinks(t *testing.T) {
	obs := observe.New(observe.Options{})
	const topics = 1000
	name := func(i int) string { return "orders-" + strconv.Itoa(i) }
	for i := range topics {
		obs.LinkTopic(name(i), observe.TopicLinks{Publishers: []string{"ingest"}, Subscribers: []string{"billing"}})
	}
	obs.LinkTopic("audit", observe.TopicLinks{Publishers: []string{"ingest"}})
	for i := range topics {
		obs.LinkTopic(name(i), observe.TopicLinks{})
	}
	links := obs.Snapshot(t.Context()).Links
	if len(links) != 1 || len(links["audit"].Publishers) != 1 {
		t.Fatalf("after linking %d topics to no pipeline, /stats has the links of %d topics, want only those of audit: %v",
			topics, len(links), links["orders-0"])
	}
}
