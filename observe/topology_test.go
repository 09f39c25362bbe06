package observe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/kafkatopology"
)

// settleOrders runs a pipeline over a topology on the in-memory backend
// (a 1s hold queue and a DLQ), publishes orders 0 to 9 and waits until
// every one is settled: orders 0 and 5 are rejected (dead-lettered), 1
// and 6 retried once, 2 and 7 deferred once, the others acked at once.
// The pipeline and the backend stop when the test ends.
func settleOrders(t *testing.T, obs *observe.Observer) *topology.Source[int] {
	t.Helper()
	top, err := topology.New("orders").Hold(time.Second).DLQ().Build()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := topology.NewMemory[int](topology.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close(context.Background()) })
	q, err := mem.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, MaxRetries: 3, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := obs.AddTopology("orders", src); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[int]bool{}
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:     "orders",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			mu.Lock()
			again := seen[m.Data]
			seen[m.Data] = true
			mu.Unlock()
			switch {
			case m.Data%5 == 0:
				return 0, topology.Reject(errors.New("malformed"))
			case m.Data%5 == 1 && !again:
				return 0, topology.Retry(errors.New("gateway down"))
			case m.Data%5 == 2 && !again:
				return 0, topology.Defer()
			}
			return m.Data, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	add(t, obs, p)
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	pub, err := topology.NewPublisher(q, topology.PublisherOptions[int]{})
	if err != nil {
		t.Fatal(err)
	}
	for n := range 10 {
		if err := pub.Publish(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "every order settled", func() bool {
		st := src.Stats()
		return st.Acked == 8 && st.DeadLettered == 2
	}, func() string { return fmt.Sprintf("%+v", src.Stats()) })
	return src
}

// Guarantee: a topology source added with AddTopology has its outcomes
// exported under the documented names, labelled topology=name, with the
// values its Stats holds once messages went through a real pipeline
// (retried through a hold queue, deferred, dead-lettered), promtool
// accepts the output, and /stats lists the source under its name.
func TestTopologyOutcomesAreExported(t *testing.T) {
	obs := observe.New(observe.Options{})
	src := settleOrders(t, obs)
	h := obs.Handler(nil)
	code, body := serveMetrics(t, h)
	if code != http.StatusOK {
		t.Fatalf("/metrics answered %d:\n%s", code, body)
	}
	for series, want := range map[string]float64{
		"boulevard_topology_messages_received_total":      14, // 10 published, 2 retried, 2 deferred
		"boulevard_topology_messages_acked_total":         8,
		"boulevard_topology_messages_retried_total":       2,
		"boulevard_topology_messages_deferred_total":      2,
		"boulevard_topology_messages_requeued_total":      0,
		"boulevard_topology_messages_discarded_total":     0,
		"boulevard_topology_messages_poisoned_total":      0,
		"boulevard_topology_held_back_messages":           0,
		"boulevard_topology_poisoned_keys":                0,
		"boulevard_topology_refused_letters":              0,
		"boulevard_topology_hand_off_kept_letters":        0,
		"boulevard_topology_subscriptions":                1,
		"boulevard_topology_undecodable_total":            0,
		"boulevard_topology_broadcast_resubscribes_total": 0,
	} {
		expectSeriesOnce(t, body, series+`{topology="orders"}`, want)
	}
	for reason, want := range map[string]float64{"rejected": 2, "max_retries": 0, "timeout": 0, "poisoned": 0, "other": 0} {
		expectSeriesOnce(t, body, `boulevard_topology_messages_dead_lettered_total{reason="`+reason+`",topology="orders"}`, want)
	}
	promtoolCheck(t, body)

	code, body = serveGet(t, h, "/stats")
	var snap observe.Snapshot
	if err := json.Unmarshal([]byte(body), &snap); code != http.StatusOK || err != nil {
		t.Fatalf("/stats answered %d (%v):\n%s", code, err, body)
	}
	if want := src.Stats(); len(snap.Topologies) != 1 || snap.Topologies[0].Name != "orders" || snap.Topologies[0].Stats != want {
		t.Errorf("/stats topologies = %+v, want orders %+v", snap.Topologies, want)
	}
}

// Guarantee: the letters a topology source's readers skipped for good
// because they do not decode (Stats.Undecodable) are exported as
// boulevard_topology_undecodable_total, and its broadcast readers'
// resubscriptions (Stats.BroadcastResubscribes) as
// boulevard_topology_broadcast_resubscribes_total, labelled
// topology=name, and promtool accepts the output.
func TestTopologyReaderCountsAreExported(t *testing.T) {
	obs := observe.New(observe.Options{})
	if err := errors.Join(obs.AddTopology("orders-dlq", fixedTopology(topology.Stats{Received: 4, Acked: 4, Undecodable: 3})),
		obs.AddTopology("audit", fixedTopology(topology.Stats{Received: 9, Acked: 9, BroadcastResubscribes: 2}))); err != nil {
		t.Fatal(err)
	}
	code, body := serveMetrics(t, obs.Handler(nil))
	if code != http.StatusOK {
		t.Fatalf("/metrics answered %d:\n%s", code, body)
	}
	expectSeriesOnce(t, body, `boulevard_topology_undecodable_total{topology="orders-dlq"}`, 3)
	expectSeriesOnce(t, body, `boulevard_topology_broadcast_resubscribes_total{topology="audit"}`, 2)
	expectSeriesOnce(t, body, `boulevard_topology_broadcast_resubscribes_total{topology="orders-dlq"}`, 0)
	promtoolCheck(t, body)
}

// fixedTopology is a topology source whose stats are given.
type fixedTopology topology.Stats

func (f fixedTopology) Stats() topology.Stats { return topology.Stats(f) }

// fixedKafkaTopology is a Kafka topology backend whose stats are given,
// and can be changed between scrapes.
type fixedKafkaTopology struct {
	st atomic.Pointer[kafkatopology.Stats]
}

func newFixedKafkaTopology(stalled ...kafkatopology.Stall) *fixedKafkaTopology {
	f := &fixedKafkaTopology{}
	f.set(stalled...)
	return f
}

func (f *fixedKafkaTopology) set(stalled ...kafkatopology.Stall) {
	f.st.Store(&kafkatopology.Stats{Stalled: stalled})
}

func (f *fixedKafkaTopology) Stats() kafkatopology.Stats { return *f.st.Load() }

// Guarantee: each stall a Kafka topology backend added with
// AddKafkaTopology reports is exported while it lasts, labelled by the
// backend's name, the hold topic and the partition (-1 for a whole
// topic): the seconds since it began and its failures, with the count of
// stalls; a stall listed twice is exported once; a stall that ended is
// gone from the next scrape (the count 0), and /stats lists the stalls
// with their errors.
func TestAKafkaTopologyStallIsExportedUntilItEnds(t *testing.T) {
	start := time.Now()
	began := start.Add(-10 * time.Minute)
	part := kafkatopology.Stall{Topic: "orders-hold-5s", Partition: 3, Offset: 42, Since: began, Failures: 7,
		Err: fmt.Errorf("%w: %w", kafkatopology.ErrReleaseStalled, kafkatopology.ErrCorruptBatch)}
	whole := kafkatopology.Stall{Topic: "orders-hold-30s", Partition: -1, Offset: -1, Since: began.Add(5 * time.Minute), Failures: 2}
	b := newFixedKafkaTopology(part, whole, part)
	obs := observe.New(observe.Options{})
	if err := obs.AddKafkaTopology("orders-kafka", b); err != nil {
		t.Fatal(err)
	}
	h := obs.Handler(nil)
	code, body := serveMetrics(t, h)
	if code != http.StatusOK {
		t.Fatalf("/metrics answered %d:\n%s", code, body)
	}
	partSeries := `{backend="orders-kafka",partition="3",topic="orders-hold-5s"}`
	wholeSeries := `{backend="orders-kafka",partition="-1",topic="orders-hold-30s"}`
	expectSeriesOnce(t, body, `boulevard_topology_release_stalls{backend="orders-kafka"}`, 2)
	expectSeriesOnce(t, body, "boulevard_topology_release_failures"+partSeries, 7)
	expectSeriesOnce(t, body, "boulevard_topology_release_failures"+wholeSeries, 2)
	for series, least := range map[string]float64{partSeries: 600, wholeSeries: 300} {
		v := seriesValues(body, "boulevard_topology_release_stalled_seconds"+series)
		if len(v) != 1 || v[0] < least || v[0] > least+time.Since(start).Seconds() {
			t.Errorf("boulevard_topology_release_stalled_seconds%s = %v, want one sample of %vs or a little more", series, v, least)
		}
	}
	promtoolCheck(t, body)

	var snap observe.Snapshot
	if code, body := serveGet(t, h, "/stats"); code != http.StatusOK || json.Unmarshal([]byte(body), &snap) != nil {
		t.Fatalf("/stats answered %d:\n%s", code, body)
	}
	if len(snap.KafkaTopologies) != 1 || snap.KafkaTopologies[0].Backend != "orders-kafka" || len(snap.KafkaTopologies[0].Stalled) != 3 {
		t.Fatalf("/stats kafkaTopologies = %+v, want orders-kafka's three stalls as listed", snap.KafkaTopologies)
	}
	if s := snap.KafkaTopologies[0].Stalled[0]; s.Topic != part.Topic || s.Partition != 3 || s.Offset != 42 || s.Failures != 7 ||
		!s.Since.Equal(began) || s.Err != part.Err.Error() {
		t.Errorf("/stats stall = %+v, want %+v with its error's message", s, part)
	}

	b.set()
	_, body = serveMetrics(t, h)
	expectSeriesOnce(t, body, `boulevard_topology_release_stalls{backend="orders-kafka"}`, 0)
	for _, m := range []string{"boulevard_topology_release_stalled_seconds", "boulevard_topology_release_failures"} {
		if strings.Contains(body, m+"{") {
			t.Errorf("%s still exported once the stalls ended:\n%s", m, body)
		}
	}
}

// Guarantee: the lag of each partition a Kafka topology backend's group
// readers claim is exported, labelled by the backend's name, the group,
// the topic and the partition: Lag and FetchLag, one series per claimed
// partition (a partition listed twice, two readers claiming it for a
// moment of a rebalance, once); a partition no longer claimed is gone
// from the next scrape, and /stats lists the partitions.
func TestAKafkaTopologyPartitionLagIsExported(t *testing.T) {
	b := newFixedKafkaTopology()
	first := kafkatopology.PartitionStats{Topic: "orders", Partition: 0, Group: "orders:billing", Committed: 10, Next: 40,
		HighWater: 50, Lag: 40, FetchLag: 10}
	b.st.Store(&kafkatopology.Stats{Partitions: []kafkatopology.PartitionStats{
		first,
		{Topic: "orders", Partition: 0, Group: "orders:billing", Committed: 5, Next: 5, HighWater: 50, Lag: 45, FetchLag: 45},
		{Topic: "orders", Partition: 1, Group: "orders:billing", Committed: 7, Next: 7, HighWater: 7},
		{Topic: "orders", Partition: 0, Group: "orders:audit", Committed: 48, Next: 50, HighWater: 50, Lag: 2},
	}})
	h, snap := exportKafkaTopology(t, b, map[string]float64{
		`boulevard_topology_kafka_lag_messages{backend="orders-kafka",group="orders:billing",partition="0",topic="orders"}`:       40,
		`boulevard_topology_kafka_fetch_lag_messages{backend="orders-kafka",group="orders:billing",partition="0",topic="orders"}`: 10,
		`boulevard_topology_kafka_lag_messages{backend="orders-kafka",group="orders:billing",partition="1",topic="orders"}`:       0,
		`boulevard_topology_kafka_fetch_lag_messages{backend="orders-kafka",group="orders:billing",partition="1",topic="orders"}`: 0,
		`boulevard_topology_kafka_lag_messages{backend="orders-kafka",group="orders:audit",partition="0",topic="orders"}`:         2,
		`boulevard_topology_kafka_fetch_lag_messages{backend="orders-kafka",group="orders:audit",partition="0",topic="orders"}`:   0,
	})
	if len(snap.KafkaTopologies) != 1 || len(snap.KafkaTopologies[0].Partitions) != 4 || snap.KafkaTopologies[0].Partitions[0].PartitionStats != first {
		t.Fatalf("/stats kafkaTopologies = %+v, want orders-kafka's four partitions as listed", snap.KafkaTopologies)
	}

	b.set()
	_, body := serveMetrics(t, h)
	for _, m := range []string{"boulevard_topology_kafka_lag_messages", "boulevard_topology_kafka_fetch_lag_messages"} {
		if strings.Contains(body, m+"{") {
			t.Errorf("%s still exported once no partition is claimed:\n%s", m, body)
		}
	}
}

// Guarantee: the letters waiting in each hold partition a Kafka topology
// backend's releasers claim (Stats.Holds, Waiting) are exported as a
// gauge labelled by the backend's name, the hold topic and the partition,
// one series per partition (a partition listed twice, once); a partition
// no longer claimed is gone from the next scrape, and /stats lists the
// hold partitions (an empty list when there are none).
func TestTheLettersWaitingInKafkaTopologyHoldsAreExported(t *testing.T) {
	b := newFixedKafkaTopology()
	first := kafkatopology.HoldStats{Topic: "orders-hold-60s", Partition: 0, Committed: 4, Next: 5, HighWater: 12, Waiting: 8}
	b.st.Store(&kafkatopology.Stats{Holds: []kafkatopology.HoldStats{
		first,
		{Topic: "orders-hold-60s", Partition: 0, Committed: 2, Next: 3, HighWater: 12, Waiting: 10},
		{Topic: "orders-hold-60s", Partition: 1, Committed: 7, Next: 7, HighWater: 7},
		{Topic: "orders-hold-600s", Partition: 0, Committed: -1, Next: 1, HighWater: 3, Waiting: 3},
	}})
	h, snap := exportKafkaTopology(t, b, map[string]float64{
		`boulevard_topology_hold_waiting_messages{backend="orders-kafka",partition="0",topic="orders-hold-60s"}`:  8,
		`boulevard_topology_hold_waiting_messages{backend="orders-kafka",partition="1",topic="orders-hold-60s"}`:  0,
		`boulevard_topology_hold_waiting_messages{backend="orders-kafka",partition="0",topic="orders-hold-600s"}`: 3,
	})
	if len(snap.KafkaTopologies) != 1 || len(snap.KafkaTopologies[0].Holds) != 4 || snap.KafkaTopologies[0].Holds[0] != first {
		t.Fatalf("/stats kafkaTopologies = %+v, want orders-kafka's four hold partitions as listed", snap.KafkaTopologies)
	}

	b.set()
	if _, body := serveMetrics(t, h); strings.Contains(body, "boulevard_topology_hold_waiting_messages{") {
		t.Errorf("boulevard_topology_hold_waiting_messages still exported once no hold partition is claimed:\n%s", body)
	}
	if _, body := serveGet(t, h, "/stats"); !strings.Contains(body, `"holds":[]`) {
		t.Errorf("/stats once no hold partition is claimed:\n%s\nwant the backend's holds an empty list, not null", body)
	}
}

// Guarantee: the hold records a Kafka topology backend's releasers
// skipped (SkippedHoldRecords) are exported as a counter labelled by the
// backend's name, 0 before any.
func TestSkippedHoldRecordsAreExported(t *testing.T) {
	b := newFixedKafkaTopology()
	obs := observe.New(observe.Options{})
	if err := obs.AddKafkaTopology("orders-kafka", b); err != nil {
		t.Fatal(err)
	}
	h := obs.Handler(nil)
	_, body := serveMetrics(t, h)
	const series = `boulevard_topology_hold_records_skipped_total{backend="orders-kafka"}`
	expectSeriesOnce(t, body, series, 0)
	b.st.Store(&kafkatopology.Stats{SkippedHoldRecords: 3})
	_, body = serveMetrics(t, h)
	expectSeriesOnce(t, body, series, 3)
	promtoolCheck(t, body)
}

// Guarantee: a hold partition whose release stalls on a real Kafka
// backend (a record batch there cannot be decoded) is exported by the
// backend added with AddKafkaTopology: its topic and partition, the
// seconds since the stall began and its failures.
func TestAStalledReleaseOnKafkaIsExported(t *testing.T) {
	c := testbroker.Kafka(t)
	b := kafkaBackend(t, c.ListenAddrs(), testbroker.SaramaConfig())
	top, err := topology.New("orders").Hold(time.Second).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Declare(t.Context(), top); err != nil {
		t.Fatal(err)
	}
	hold := top.Holds()[0].Name
	hits := testbroker.ServeCorruptBatch(c, hold, 0, 0)
	obs := observe.New(observe.Options{})
	if err := obs.AddKafkaTopology("orders-kafka", b); err != nil {
		t.Fatal(err)
	}
	h := obs.Handler(nil)
	series := fmt.Sprintf(`{backend="orders-kafka",partition="0",topic=%q}`, hold)
	var body string
	wait.For(t, "the stalled hold partition exported", func() bool {
		_, body = serveMetrics(t, h)
		v := seriesValues(body, "boulevard_topology_release_failures"+series)
		return len(v) == 1 && v[0] >= 1
	}, func() string {
		return fmt.Sprintf("%d corrupt fetches; Stats() = %+v; /metrics:\n%s", hits.Load(), b.Stats(), body)
	})
	if v := seriesValues(body, "boulevard_topology_release_stalled_seconds"+series); len(v) != 1 || v[0] < 0 {
		t.Errorf("boulevard_topology_release_stalled_seconds%s = %v, want one sample, not negative", series, v)
	}
	expectSeriesOnce(t, body, `boulevard_topology_release_stalls{backend="orders-kafka"}`, 1)
	promtoolCheck(t, body)
}

// exportKafkaTopology adds b to an Observer as "orders-kafka" and checks
// that a scrape of its handler h has each series of want once, with its
// value, that promtool accepts the scrape, and that a pedantic registry
// gathers it (no series sent twice). It returns h and what /stats says.
func exportKafkaTopology(t *testing.T, b observe.KafkaTopology, want map[string]float64) (http.Handler, observe.Snapshot) {
	t.Helper()
	obs := observe.New(observe.Options{})
	if err := obs.AddKafkaTopology("orders-kafka", b); err != nil {
		t.Fatal(err)
	}
	h := obs.Handler(nil)
	_, body := serveMetrics(t, h)
	for series, v := range want {
		expectSeriesOnce(t, body, series, v)
	}
	promtoolCheck(t, body)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(obs)
	if _, err := reg.Gather(); err != nil {
		t.Errorf("gathering the backend's series: %v", err)
	}
	var snap observe.Snapshot
	if code, body := serveGet(t, h, "/stats"); code != http.StatusOK || json.Unmarshal([]byte(body), &snap) != nil {
		t.Fatalf("/stats answered %d:\n%s", code, body)
	}
	return h, snap
}

// Guarantee: whether the fetches of each partition a Kafka topology
// backend's group readers claim fail (Stats.Partitions' FetchErr) is
// exported as a gauge labelled by the backend's name, the group, the topic
// and the partition: 1 while they fail, 0 while they do not, one series
// per claimed partition (a partition listed twice, once); a partition no
// longer claimed is gone from the next scrape, and /stats gives each
// partition's FetchErr as its message ("" while its fetches succeed).
func TestAKafkaTopologyPartitionWhoseFetchesFailIsExported(t *testing.T) {
	denied := fmt.Errorf("fetching partition %q/%d: %w", "orders", 1, errors.New("kafka server: The client is not authorized to access this topic"))
	b := newFixedKafkaTopology()
	b.st.Store(&kafkatopology.Stats{Partitions: []kafkatopology.PartitionStats{
		{Topic: "orders", Partition: 0, Group: "orders:billing", Committed: 10, Next: 10, HighWater: 10},
		{Topic: "orders", Partition: 1, Group: "orders:billing", Committed: 7, Next: 7, HighWater: 7, FetchErr: denied},
		{Topic: "orders", Partition: 1, Group: "orders:billing", Committed: 5, Next: 5, HighWater: 7, Lag: 2, FetchLag: 2},
	}})
	const failing = "boulevard_topology_kafka_fetch_failing"
	h, snap := exportKafkaTopology(t, b, map[string]float64{
		failing + `{backend="orders-kafka",group="orders:billing",partition="0",topic="orders"}`: 0,
		failing + `{backend="orders-kafka",group="orders:billing",partition="1",topic="orders"}`: 1,
	})
	if len(snap.KafkaTopologies) != 1 || len(snap.KafkaTopologies[0].Partitions) != 3 {
		t.Fatalf("/stats kafkaTopologies = %+v, want orders-kafka's three partitions as listed", snap.KafkaTopologies)
	}
	for i, want := range []string{"", denied.Error(), ""} {
		if got := snap.KafkaTopologies[0].Partitions[i].FetchErr; got != want {
			t.Errorf("/stats partition %d FetchErr = %q, want %q", i, got, want)
		}
	}

	b.set()
	if _, body := serveMetrics(t, h); strings.Contains(body, failing+"{") {
		t.Errorf("%s still exported once no partition is claimed:\n%s", failing, body)
	}
}

// Guarantee: on a real Kafka backend, a partition whose group reader an
// ACL change denies READ is exported as failing its fetches
// (boulevard_topology_kafka_fetch_failing 1) and /stats gives its
// FetchErr, naming the topic and the authorization failure and not the
// user's password; once READ is granted back and the reader fetches
// again, the gauge is 0 and /stats gives no FetchErr.
func TestAKafkaTopologyPartitionDeniedReadIsExportedAsFailingItsFetches(t *testing.T) {
	k := testbroker.KafkaWithACLs(t)
	b := kafkaBackend(t, k.ListenAddrs(), k.Config())
	top, err := topology.New("fetch-denied").Build()
	if err != nil {
		t.Fatal(err)
	}
	q, err := b.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	r, err := q.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(context.Background()); err != nil {
			t.Errorf("closing the reader: %v", err)
		}
	})
	publish := func(n int) {
		t.Helper()
		if err := q.Publish(t.Context(), topology.Letter[int]{Value: n}); err != nil {
			t.Fatal(err)
		}
	}
	receiveAndSettle := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		buf := make([]topology.Letter[int], 1)
		if _, err := r.Receive(ctx, buf); err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if err := r.Settle(t.Context(), &buf[0]); err != nil {
			t.Fatal(err)
		}
	}
	publish(1)
	receiveAndSettle()
	parts := b.Stats().Partitions
	if len(parts) != 1 {
		t.Fatalf("Stats().Partitions = %+v, want the one partition the reader claims", parts)
	}
	kname := parts[0].Topic
	obs := observe.New(observe.Options{})
	if err := obs.AddKafkaTopology("orders-kafka", b); err != nil {
		t.Fatal(err)
	}
	h := obs.Handler(nil)
	series := fmt.Sprintf(`boulevard_topology_kafka_fetch_failing{backend="orders-kafka",group=%q,partition="0",topic=%q}`, parts[0].Group, kname)
	var body string
	failing := func(want float64) func() bool {
		return func() bool {
			_, body = serveMetrics(t, h)
			v := seriesValues(body, series)
			return len(v) == 1 && v[0] == want
		}
	}
	state := func() string { return fmt.Sprintf("Stats() = %+v; /metrics:\n%s", b.Stats(), body) }
	fetchErr := func() string {
		t.Helper()
		var snap observe.Snapshot
		if code, body := serveGet(t, h, "/stats"); code != http.StatusOK || json.Unmarshal([]byte(body), &snap) != nil {
			t.Fatalf("/stats answered %d:\n%s", code, body)
		}
		if len(snap.KafkaTopologies) != 1 || len(snap.KafkaTopologies[0].Partitions) != 1 {
			t.Fatalf("/stats kafkaTopologies = %+v, want the one partition", snap.KafkaTopologies)
		}
		return snap.KafkaTopologies[0].Partitions[0].FetchErr
	}
	wait.For(t, "the partition exported as fetching", failing(0), state)
	if e := fetchErr(); e != "" {
		t.Errorf("/stats FetchErr = %q while the reader fetches, want none", e)
	}

	k.Deny(t, kname, sarama.AclOperationRead)
	publish(2)
	wait.For(t, "the partition exported as failing its fetches", failing(1), state)
	if e := fetchErr(); !strings.Contains(e, kname) || !strings.Contains(e, "not authorized") || strings.Contains(e, k.Password) {
		t.Errorf("/stats FetchErr = %q, want the authorization failure naming topic %s, without the password", e, kname)
	}
	promtoolCheck(t, body)

	k.Grant(t, kname, sarama.AclOperationRead)
	receiveAndSettle()
	wait.For(t, "the partition exported as fetching again", failing(0), state)
	if e := fetchErr(); e != "" {
		t.Errorf("/stats FetchErr = %q once the reader fetches again, want none", e)
	}
}

// kafkaBackend returns a Kafka topology backend of int letters on the
// cluster at brokers, connecting with cfg, closed when t ends.
func kafkaBackend(t *testing.T, brokers []string, cfg *sarama.Config) *kafkatopology.Backend[int] {
	t.Helper()
	b, err := kafkatopology.New(kafkatopology.Options[int]{
		Brokers:       brokers,
		Config:        cfg,
		Codec:         topic.JSONCodec[int]{},
		AdminTimeout:  30 * time.Second,
		RevokeTimeout: 2 * time.Second,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("closing the backend: %v", err)
		}
	})
	return b
}
