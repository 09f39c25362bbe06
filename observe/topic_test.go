package observe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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

// Guarantee: the figures of each partition a topic's subscribers read
// (topic.Stats.Partitions) are exported as gauges labelled by the topic's
// name, the group (none for a broadcast subscriber) and the partition:
// lag, committed offset, high-water mark and whether its fetches fail,
// one series per group and partition (the first listed: a group's member
// furthest ahead, the broadcast subscriber furthest behind); a partition no longer read is gone from the next
// scrape.
func TestATopicsPartitionLagIsExported(t *testing.T) {
	st := topic.Stats{BalancedGroups: 1, BroadcastSubscribers: 2, Partitions: []topic.PartitionStats{
		{Partition: 0, Committed: 2, HighWater: 10, Lag: 8},
		{Partition: 0, Committed: 5, HighWater: 10, Lag: 5},
		{Group: "orders:billing", Partition: 0, Committed: 3, HighWater: 10, Lag: 7, FetchErr: errors.New("denied")},
		{Group: "orders:billing", Partition: 1, Committed: 4, HighWater: 4},
	}}
	obs := observe.New(observe.Options{})
	if err := obs.AddTopic("orders", fixedTopic(st)); err != nil {
		t.Fatal(err)
	}
	h := obs.Handler(nil)
	_, body := serveMetrics(t, h)
	for series, want := range map[string]float64{
		`boulevard_topic_lag_messages{group="",partition="0",topic="orders"}`:                    8,
		`boulevard_topic_committed_offset{group="",partition="0",topic="orders"}`:                2,
		`boulevard_topic_high_water_offset{group="",partition="0",topic="orders"}`:               10,
		`boulevard_topic_fetch_failing{group="",partition="0",topic="orders"}`:                   0,
		`boulevard_topic_lag_messages{group="orders:billing",partition="0",topic="orders"}`:      7,
		`boulevard_topic_committed_offset{group="orders:billing",partition="0",topic="orders"}`:  3,
		`boulevard_topic_high_water_offset{group="orders:billing",partition="0",topic="orders"}`: 10,
		`boulevard_topic_fetch_failing{group="orders:billing",partition="0",topic="orders"}`:     1,
		`boulevard_topic_lag_messages{group="orders:billing",partition="1",topic="orders"}`:      0,
		`boulevard_topic_fetch_failing{group="orders:billing",partition="1",topic="orders"}`:     0,
	} {
		expectSeriesOnce(t, body, series, want)
	}
	promtoolCheck(t, body)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(obs)
	if _, err := reg.Gather(); err != nil {
		t.Errorf("gathering the topic's series: %v", err)
	}

	obs.RemoveTopic("orders")
	if err := obs.AddTopic("orders", fixedTopic(topic.Stats{BalancedGroups: 1})); err != nil {
		t.Fatal(err)
	}
	_, body = serveMetrics(t, h)
	for _, m := range []string{"boulevard_topic_lag_messages", "boulevard_topic_committed_offset", "boulevard_topic_high_water_offset", "boulevard_topic_fetch_failing"} {
		if strings.Contains(body, m+"{") {
			t.Errorf("%s still exported once no partition is read:\n%s", m, body)
		}
	}
}

// Guarantee: /stats lists the partitions a topic's subscribers read
// (topic.Stats.Partitions) in the order listed, each with its group,
// partition, committed offset, high-water mark and lag under their Go
// names, and the error of its failing fetches as its message in FetchErr,
// absent while its fetches do not fail.
func TestStatsGiveATopicsPartitionsWithTheirFetchErrorAsText(t *testing.T) {
	denied := fmt.Errorf("fetching partition %q/%d: %w", "orders", 0, errors.New("kafka server: The client is not authorized to access this topic"))
	obs := observe.New(observe.Options{})
	if err := obs.AddTopic("orders", fixedTopic(topic.Stats{BalancedGroups: 1, BroadcastSubscribers: 1, Partitions: []topic.PartitionStats{
		{Partition: 0, Committed: 2, HighWater: 10, Lag: 8},
		{Group: "orders:billing", Partition: 0, Committed: 3, HighWater: 10, Lag: 7, FetchErr: denied},
	}})); err != nil {
		t.Fatal(err)
	}
	code, body := serveGet(t, obs.Handler(nil), "/stats")
	var snap struct {
		Topics []struct {
			Name       string           `json:"name"`
			Partitions []map[string]any `json:"Partitions"`
		} `json:"topics"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &snap) != nil {
		t.Fatalf("/stats answered %d:\n%s", code, body)
	}
	want := []map[string]any{
		{"Group": "", "Partition": 0.0, "Committed": 2.0, "HighWater": 10.0, "Lag": 8.0},
		{"Group": "orders:billing", "Partition": 0.0, "Committed": 3.0, "HighWater": 10.0, "Lag": 7.0, "FetchErr": denied.Error()},
	}
	if len(snap.Topics) != 1 || !slices.EqualFunc(snap.Topics[0].Partitions, want, maps.Equal) {
		t.Errorf("/stats topics = %+v, want orders with the partitions %+v", snap.Topics, want)
	}
}
