package observe_test

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/boulevard-go/boulevard/internal/stats"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// series is one exported series a test expects: its metric, its full
// label set, its type and its value (for a histogram, its sample count).
type series struct {
	name   string
	labels map[string]string
	typ    dto.MetricType
	value  float64
}

// expectSeries fails t for each of want that obs does not export with
// exactly those labels, that type and that value.
func expectSeries(t *testing.T, obs *observe.Observer, want []series) {
	t.Helper()
	mfs, err := newRegistry(t, obs).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		found := false
		for _, mf := range mfs {
			if mf.GetName() != w.name {
				continue
			}
		next:
			for _, m := range mf.GetMetric() {
				if len(m.GetLabel()) != len(w.labels) {
					continue
				}
				for _, lp := range m.GetLabel() {
					if v, ok := w.labels[lp.GetName()]; !ok || v != lp.GetValue() {
						continue next
					}
				}
				found = true
				if mf.GetType() != w.typ || value(m) != w.value {
					t.Errorf("%s%v = %v %v, want %v %v", w.name, w.labels, mf.GetType(), value(m), w.typ, w.value)
				}
			}
		}
		if !found {
			t.Errorf("%s%v is not exported", w.name, w.labels)
		}
	}
}

// Guarantee: each pipeline metric carries the stat it is documented to
// carry, of the type and in the unit the documentation gives (seconds
// for durations, Unix seconds for a time, messages per second for the
// rate limit), under the labels of its own stage, batcher, feed,
// disposition or trigger: a dashboard or alert that reads one series
// (in flight, not queued; retries, not discards) reads what it names.
func TestEachPipelineMetricCarriesItsOwnStatInItsUnit(t *testing.T) {
	since := time.Unix(1_700_000_000, 500_000_000)
	latency := stats.Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{40, 5, 0}, Count: 45, Sum: 9}
	sizes := stats.Histogram{Bounds: []float64{1, 10}, Counts: []uint64{2, 44, 0}, Count: 46, Sum: 300}
	st := pipeline.Stats{
		Name:      "orders",
		Started:   since,
		RateLimit: &producer.RateLimit{Allowed: 50, Interval: 10 * time.Second},
		Producers: []pipeline.ProducerStats{{
			StageStatus: producer.StageStatus{Stage: "orders.producer.0", State: producer.StateDegraded, Since: since,
				Restarts: 3, ConsecutiveFailures: 4},
			Buffered:  5,
			Unhandled: 6,
			// Two open feeds of one name are exported as one, their
			// counters added.
			Feeds: []producer.NamedFeedStats{
				{Name: "p0", FeedStats: producer.FeedStats{Remaining: 7, Granted: 80, Delivered: 90, Dispatched: 100}},
				{Name: "p0", FeedStats: producer.FeedStats{Remaining: 1, Granted: 2, Delivered: 3, Dispatched: 4}},
			},
		}},
		Processors: stats.Processors{Stage: "orders.processors", Concurrency: 11, In: 12, Succeeded: 13,
			Failed: stats.Failures{Default: 14, Retry: 15, Discard: 16}, Unhandled: 17, InFlight: 18, Queued: 19, QueueCapacity: 20,
			Busy: 21500 * time.Millisecond, Latency: latency, LongestCall: 2500 * time.Millisecond},
		Batchers: []stats.Batcher{{Name: "default", Stage: "orders.batcher.default", Concurrency: 25, In: 26,
			Batches: map[string]uint64{"size": 27, "timeout": 28}, Sizes: sizes, Succeeded: 29,
			Failed: stats.Failures{Default: 30, Retry: 31, Discard: 32}, Unhandled: 33, Dropped: 34, InFlight: 35,
			Queued: 36, QueueCapacity: 37, QueuedBatches: 38, BatchQueueCapacity: 39, Busy: 40500 * time.Millisecond,
			Latency: latency, LongestCall: 4100 * time.Millisecond}},
	}
	obs := observe.New(observe.Options{})
	add(t, obs, statsOf(st))

	const c, g, h = dto.MetricType_COUNTER, dto.MetricType_GAUGE, dto.MetricType_HISTOGRAM
	p := map[string]string{"pipeline": "orders"}
	stage := map[string]string{"pipeline": "orders", "stage": "orders.producer.0"}
	feed := map[string]string{"pipeline": "orders", "stage": "orders.producer.0", "feed": "p0"}
	bat := map[string]string{"pipeline": "orders", "batcher": "default"}
	with := func(base map[string]string, k, v string) map[string]string {
		m := map[string]string{k: v}
		for bk, bv := range base {
			m[bk] = bv
		}
		return m
	}
	want := []series{
		{"boulevard_pipeline_up", p, g, 1},
		{"boulevard_pipeline_rate_limit_messages_per_second", p, g, 5},
		{"boulevard_producer_state", with(stage, "state", "degraded"), g, 1},
		{"boulevard_producer_state", with(stage, "state", "running"), g, 0},
		{"boulevard_producer_restarts_total", stage, c, 3},
		{"boulevard_producer_consecutive_failures", stage, g, 4},
		{"boulevard_producer_buffered_messages", stage, g, 5},
		{"boulevard_producer_messages_unhandled_total", stage, c, 6},
		{"boulevard_producer_state_since_seconds", stage, g, 1_700_000_000.5},
		{"boulevard_producer_feed_permits_granted_total", feed, c, 82},
		{"boulevard_producer_feed_permits_outstanding", feed, g, 8},
		{"boulevard_producer_feed_messages_delivered_total", feed, c, 93},
		{"boulevard_producer_feed_messages_dispatched_total", feed, c, 104},
		{"boulevard_processor_concurrency", p, g, 11},
		{"boulevard_processor_messages_received_total", p, c, 12},
		{"boulevard_processor_messages_succeeded_total", p, c, 13},
		{"boulevard_processor_messages_failed_total", with(p, "disposition", "default"), c, 14},
		{"boulevard_processor_messages_failed_total", with(p, "disposition", "retry"), c, 15},
		{"boulevard_processor_messages_failed_total", with(p, "disposition", "discard"), c, 16},
		{"boulevard_processor_messages_unhandled_total", p, c, 17},
		{"boulevard_processor_messages_in_flight", p, g, 18},
		{"boulevard_processor_queue_messages", p, g, 19},
		{"boulevard_processor_queue_capacity_messages", p, g, 20},
		{"boulevard_processor_busy_seconds_total", p, c, 21.5},
		{"boulevard_processor_handler_duration_seconds", p, h, 45},
		{"boulevard_processor_longest_call_seconds", p, g, 2.5},
		{"boulevard_batcher_concurrency", bat, g, 25},
		{"boulevard_batcher_messages_received_total", bat, c, 26},
		{"boulevard_batcher_batches_total", with(bat, "trigger", "size"), c, 27},
		{"boulevard_batcher_batches_total", with(bat, "trigger", "timeout"), c, 28},
		{"boulevard_batcher_batch_size_messages", bat, h, 46},
		{"boulevard_batcher_messages_succeeded_total", bat, c, 29},
		{"boulevard_batcher_messages_failed_total", with(bat, "disposition", "default"), c, 30},
		{"boulevard_batcher_messages_failed_total", with(bat, "disposition", "retry"), c, 31},
		{"boulevard_batcher_messages_failed_total", with(bat, "disposition", "discard"), c, 32},
		{"boulevard_batcher_messages_unhandled_total", bat, c, 33},
		{"boulevard_batcher_messages_dropped_total", bat, c, 34},
		{"boulevard_batcher_messages_in_flight", bat, g, 35},
		{"boulevard_batcher_queue_messages", bat, g, 36},
		{"boulevard_batcher_queue_capacity_messages", bat, g, 37},
		{"boulevard_batcher_queued_batches", bat, g, 38},
		{"boulevard_batcher_batch_queue_capacity_batches", bat, g, 39},
		{"boulevard_batcher_busy_seconds_total", bat, c, 40.5},
		{"boulevard_batcher_handler_duration_seconds", bat, h, 45},
		{"boulevard_batcher_longest_call_seconds", bat, g, 4.1},
	}
	expectSeries(t, obs, want)
}

// Guarantee: each metric of a topology source carries the stat it is
// documented to carry, of its documented type, and each dead-letter
// reason its own count: an alert on messages dead-lettered for timing
// out, or on letters held back, reads that and nothing else.
func TestEachTopologyMetricCarriesItsOwnStat(t *testing.T) {
	st := topology.Stats{Received: 1, Acked: 2, Retried: 3, Deferred: 4, Requeued: 5, Discarded: 6,
		Poisoned: 12, Subscriptions: 13, HeldBack: 14, Refused: 15, SettleFailed: 16, HandOffFailed: 17,
		Undecodable: 18, BroadcastResubscribes: 19, DeadLetterFailed: 20, PoisonedKeys: 21, HandOffKept: 22,
		DeadLetteredBy: topology.DeadReasons{Rejected: 7, MaxRetries: 8, Timeout: 9, Poisoned: 10, Other: 11}}
	obs := observe.New(observe.Options{})
	if err := obs.AddTopology("orders", fixedTopology(st)); err != nil {
		t.Fatal(err)
	}
	const c, g = dto.MetricType_COUNTER, dto.MetricType_GAUGE
	top := map[string]string{"topology": "orders"}
	dead := func(reason string) map[string]string {
		return map[string]string{"topology": "orders", "reason": reason}
	}
	expectSeries(t, obs, []series{
		{"boulevard_topology_messages_received_total", top, c, 1},
		{"boulevard_topology_messages_acked_total", top, c, 2},
		{"boulevard_topology_messages_retried_total", top, c, 3},
		{"boulevard_topology_messages_deferred_total", top, c, 4},
		{"boulevard_topology_messages_requeued_total", top, c, 5},
		{"boulevard_topology_messages_discarded_total", top, c, 6},
		{"boulevard_topology_messages_dead_lettered_total", dead("rejected"), c, 7},
		{"boulevard_topology_messages_dead_lettered_total", dead("max_retries"), c, 8},
		{"boulevard_topology_messages_dead_lettered_total", dead("timeout"), c, 9},
		{"boulevard_topology_messages_dead_lettered_total", dead("poisoned"), c, 10},
		{"boulevard_topology_messages_dead_lettered_total", dead("other"), c, 11},
		{"boulevard_topology_messages_poisoned_total", top, c, 12},
		{"boulevard_topology_subscriptions", top, g, 13},
		{"boulevard_topology_held_back_messages", top, g, 14},
		{"boulevard_topology_refused_letters", top, g, 15},
		{"boulevard_topology_settle_failures_total", top, c, 16},
		{"boulevard_topology_hand_off_failures_total", top, c, 17},
		{"boulevard_topology_undecodable_total", top, c, 18},
		{"boulevard_topology_broadcast_resubscribes_total", top, c, 19},
		{"boulevard_topology_dead_letter_failures_total", top, c, 20},
		{"boulevard_topology_poisoned_keys", top, g, 21},
		{"boulevard_topology_hand_off_kept_letters", top, g, 22},
	})
}

// Guarantee: each metric of a Kafka source carries the stat it is
// documented to carry, of its documented type: the consumer lag an
// alert reads is the lag from the committed offset, not the fetch lag,
// and the committed offset is not the high-water mark.
func TestEachKafkaMetricCarriesItsOwnStat(t *testing.T) {
	st := kafka.Stats{GroupID: "billing", Members: []kafka.MemberStats{{
		Stage: "orders.producer.0", GenerationID: 4, Rebalances: 5, Commits: 6, CommitErrors: 7,
		Partitions: []kafka.PartitionStats{
			{Topic: "orders", Partition: 2, GenerationID: 4, Committed: 100, Next: 130, HighWater: 150, Lag: 50, FetchLag: 20, InFlight: 8, FailedCommitted: 9},
			{Topic: "orders", Partition: 3, GenerationID: 4},
		},
	}}}
	obs := observe.New(observe.Options{})
	if err := obs.AddKafka(t.Context(), newFixedKafka(st)); err != nil {
		t.Fatal(err)
	}
	const c, g = dto.MetricType_COUNTER, dto.MetricType_GAUGE
	member := map[string]string{"group": "billing", "stage": "orders.producer.0"}
	part := map[string]string{"group": "billing", "topic": "orders", "partition": "2"}
	expectSeries(t, obs, []series{
		{"boulevard_kafka_assigned_partitions", member, g, 2},
		{"boulevard_kafka_generation", member, g, 4},
		{"boulevard_kafka_rebalances_total", member, c, 5},
		{"boulevard_kafka_commits_total", member, c, 6},
		{"boulevard_kafka_commit_errors_total", member, c, 7},
		{"boulevard_kafka_consumer_lag_messages", part, g, 50},
		{"boulevard_kafka_fetch_lag_messages", part, g, 20},
		{"boulevard_kafka_committed_offset", part, g, 100},
		{"boulevard_kafka_high_water_offset", part, g, 150},
		{"boulevard_kafka_in_flight_messages", part, g, 8},
		{"boulevard_kafka_failed_committed_total", part, c, 9},
	})
}

// fixedTopic is a topic whose stats are given.
type fixedTopic topic.Stats

func (f fixedTopic) Stats() topic.Stats { return topic.Stats(f) }

// Guarantee: each metric of a topic carries the stat it is documented to
// carry, of its documented type: an alert on publishes dropped because
// the topic was full does not read the broadcasts slow subscribers
// missed.
func TestEachTopicMetricCarriesItsOwnStat(t *testing.T) {
	st := topic.Stats{BalancedGroups: 1, BroadcastSubscribers: 2, Published: 3, Dropped: 4, Lagged: 5, InFlight: 6,
		Undecodable: 7, BroadcastResubscribes: 8}
	obs := observe.New(observe.Options{})
	if err := obs.AddTopic("orders", fixedTopic(st)); err != nil {
		t.Fatal(err)
	}
	const c, g = dto.MetricType_COUNTER, dto.MetricType_GAUGE
	top := map[string]string{"topic": "orders"}
	expectSeries(t, obs, []series{
		{"boulevard_topic_balanced_groups", top, g, 1},
		{"boulevard_topic_broadcast_subscribers", top, g, 2},
		{"boulevard_topic_published_total", top, c, 3},
		{"boulevard_topic_dropped_total", top, c, 4},
		{"boulevard_topic_lagged_total", top, c, 5},
		{"boulevard_topic_in_flight_publishes", top, g, 6},
		{"boulevard_topic_undecodable_total", top, c, 7},
		{"boulevard_topic_broadcast_resubscribes_total", top, c, 8},
	})
}

// Guarantee: /stats names each field of a pipeline, of a producer stage
// and of its feeds as the dashboard reads it, so that the dashboard shows
// a pipeline stopped and why, a stage failing in a row, its restarts, its
// buffer and its feeds.
func TestStatsJSONNamesThePipelineAndProducerFieldsTheDashboardReads(t *testing.T) {
	st := pipeline.Stats{Name: "orders", Stopped: true, Err: errors.New("source gave up"), Producers: []pipeline.ProducerStats{{
		StageStatus: producer.StageStatus{Stage: "orders.producer.0", State: producer.StateConnecting, Restarts: 2,
			ConsecutiveFailures: 3, LastError: errors.New("refused")},
		Buffered: 4,
		Feeds:    []producer.NamedFeedStats{{Name: "p0", FeedStats: producer.FeedStats{Remaining: 5, Delivered: 6}}},
	}}}
	obs := observe.New(observe.Options{})
	add(t, obs, statsOf(st))
	rr := httptest.NewRecorder()
	obs.Handler(nil).ServeHTTP(rr, httptest.NewRequest("GET", "/stats", nil))
	var snap struct {
		Pipelines []map[string]any `json:"pipelines"`
	}
	if err := json.NewDecoder(rr.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Pipelines) != 1 {
		t.Fatalf("/stats pipelines = %+v, want one", snap.Pipelines)
	}
	pl := snap.Pipelines[0]
	for key, want := range map[string]any{"name": "orders", "stopped": true, "err": "source gave up"} {
		if pl[key] != want {
			t.Errorf("/stats pipeline %q = %v, want %v", key, pl[key], want)
		}
	}
	producers, _ := pl["producers"].([]any)
	if len(producers) != 1 {
		t.Fatalf("/stats pipeline producers = %v, want one producer stage", pl["producers"])
	}
	ps, _ := producers[0].(map[string]any)
	for key, want := range map[string]any{"stage": "orders.producer.0", "state": "connecting", "restarts": 2.0,
		"consecutiveFailures": 3.0, "lastError": "refused", "buffered": 4.0} {
		if ps[key] != want {
			t.Errorf("/stats producer stage %q = %v, want %v (stage %v)", key, ps[key], want, ps)
		}
	}
	feeds, _ := ps["feeds"].([]any)
	if len(feeds) != 1 {
		t.Fatalf("/stats producer stage feeds = %v, want one", ps["feeds"])
	}
	feed, _ := feeds[0].(map[string]any)
	for key, want := range map[string]any{"name": "p0", "outstanding": 5.0, "delivered": 6.0} {
		if feed[key] != want {
			t.Errorf("/stats feed %q = %v, want %v (feed %v)", key, feed[key], want, feed)
		}
	}
}
