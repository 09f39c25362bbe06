package observe_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/kafkatopology"
)

// seriesValues returns the values of every sample of /metrics body whose
// line starts with series (a metric name and its labels, as exported).
func seriesValues(body, series string) []float64 {
	var out []float64
	for line := range strings.Lines(body) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), series+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			v = -1
		}
		out = append(out, v)
	}
	return out
}

// expectSeriesOnce fails the test unless body has exactly one sample of
// series, of value want.
func expectSeriesOnce(t *testing.T, body, series string, want float64) {
	t.Helper()
	if got := seriesValues(body, series); len(got) != 1 || got[0] != want {
		t.Errorf("%s: samples %v, want exactly one, %v", series, got, want)
	}
}

// logRecorder is a slog.Handler keeping the message of every record.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	msg := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msg)
	return nil
}

func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// lines returns the records logged that contain every one of words.
func (r *logRecorder) lines(words ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
next:
	for _, m := range r.msgs {
		for _, w := range words {
			if !strings.Contains(m, w) {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

// Guarantee: adding a second pipeline under a name already added never
// breaks /metrics: the scrape through the HTTP handler answers 200 with
// each of the name's series once, those of the pipeline added first (the
// second is refused), and promtool accepts the output.
func TestScrapeAnswersEachSeriesOnceWhenAPipelineNameIsAddedTwice(t *testing.T) {
	first, second := pushPipeline(t, "orders"), pushPipeline(t, "orders")
	push(t, first, acker.NewRecorder(false), 0, 4)
	wait.For(t, "the first pipeline's processors took 4 messages", func() bool { return first.Stats().Processors.In == 4 })
	obs := observe.New(observe.Options{Logger: slog.New(slog.DiscardHandler)})
	add(t, obs, first)
	_ = obs.Add(t.Context(), second) // refused: TestAddRefusesANameAlreadyAdded checks the error
	code, body := serveMetrics(t, obs.Handler(nil))
	if code != http.StatusOK {
		t.Fatalf("/metrics answered %d, want 200:\n%s", code, body)
	}
	expectSeriesOnce(t, body, `boulevard_pipeline_up{pipeline="orders"}`, 1)
	expectSeriesOnce(t, body, `boulevard_processor_messages_received_total{pipeline="orders"}`, 4)
	expectSeriesOnce(t, body, `boulevard_batcher_concurrency{batcher="default",pipeline="orders"}`, 1)
	promtoolCheck(t, body)
}

// fixedKafka is a Kafka source whose stats the test sets.
type fixedKafka struct{ st atomic.Pointer[kafka.Stats] }

func newFixedKafka(st kafka.Stats) *fixedKafka {
	f := &fixedKafka{}
	f.st.Store(&st)
	return f
}

func (f *fixedKafka) Stats() kafka.Stats { return *f.st.Load() }

// Guarantee: Add, AddTopic, AddPulsar, AddTopology, AddKafkaTopology and
// AddKafka refuse what would be
// exported under a name (or, for a Kafka source, as a source) already
// added, with an error wrapping ErrDuplicate that names it; Add adds none
// of its pipelines when it refuses one. Names are compared as exported:
// two names that differ only in bytes that are not valid UTF-8 collide.
func TestAddRefusesANameAlreadyAdded(t *testing.T) {
	obs := observe.New(observe.Options{})
	first := pushPipeline(t, "orders")
	add(t, obs, first)
	isDuplicate := func(what string, err error, name string) {
		t.Helper()
		if !errors.Is(err, observe.ErrDuplicate) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want one wrapping ErrDuplicate naming %s", what, err, name)
		}
	}
	isDuplicate("Add of a second pipeline named orders", obs.Add(t.Context(), pushPipeline(t, "orders")), `"orders"`)
	isDuplicate("Add of the same pipeline again", obs.Add(t.Context(), first), `"orders"`)
	isDuplicate("Add of billing and a pipeline named orders", obs.Add(t.Context(), pushPipeline(t, "billing"), pushPipeline(t, "orders")), `"orders"`)
	isDuplicate("Add of two pipelines named twice", obs.Add(t.Context(), pushPipeline(t, "twice"), pushPipeline(t, "twice")), `"twice"`)
	if reps := obs.Readiness(t.Context()); len(reps) != 1 || reps[0].Name != "orders" {
		t.Errorf("pipelines reported after the refused Adds: %+v, want only orders", reps)
	}
	add(t, obs, pushPipeline(t, "billing")) // the refused call added nothing

	h := memTopic(t, "orders", topic.Options{})
	if err := obs.AddTopic("orders", h); err != nil {
		t.Fatal(err)
	}
	isDuplicate("AddTopic of orders again", obs.AddTopic("orders", h), `"orders"`)
	if err := obs.AddTopic("t\xff", h); err != nil {
		t.Fatal(err)
	}
	isDuplicate("AddTopic of a name exported as the same label", obs.AddTopic("t\xfe", h), "topic")

	if err := obs.AddPulsar("billing", fixedPulsar(pulsar.Stats{})); err != nil {
		t.Fatal(err)
	}
	isDuplicate("AddPulsar of billing again", obs.AddPulsar("billing", fixedPulsar(pulsar.Stats{Consumers: 1})), `"billing"`)

	if err := obs.AddTopology("orders", fixedTopology(topology.Stats{})); err != nil {
		t.Fatal(err)
	}
	isDuplicate("AddTopology of orders again", obs.AddTopology("orders", fixedTopology(topology.Stats{Acked: 1})), `"orders"`)
	if err := obs.AddKafkaTopology("orders", newFixedKafkaTopology()); err != nil {
		t.Errorf("AddKafkaTopology under the name of a topology source: %v, want nil (another label)", err)
	}
	isDuplicate("AddKafkaTopology of orders again", obs.AddKafkaTopology("orders", newFixedKafkaTopology()), `"orders"`)

	src := newFixedKafka(kafka.Stats{GroupID: "readers"})
	if err := obs.AddKafka(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	isDuplicate("AddKafka of the same source again", obs.AddKafka(t.Context(), src), `"readers"`)
	if err := obs.AddKafka(t.Context(), newFixedKafka(kafka.Stats{GroupID: "readers"})); err != nil {
		t.Errorf("AddKafka of another source of the same group: %v, want nil", err)
	}
	if code, body := serveMetrics(t, obs.Handler(nil)); code != http.StatusOK {
		t.Fatalf("/metrics answered %d, want 200:\n%s", code, body)
	}
}

// Guarantee: a service that rebuilds a pipeline swaps it in under the
// same name on the same Observer: after Replace the series and /readyz
// follow the rebuilt pipeline; after Remove the name is reported nowhere,
// and Add of a new pipeline of that name then succeeds, its series
// following it.
func TestReplaceAndRemoveSwapARebuiltPipeline(t *testing.T) {
	old := pushPipeline(t, "orders")
	push(t, old, acker.NewRecorder(false), 0, 6)
	wait.For(t, "the old pipeline's processors took 6 messages", func() bool { return old.Stats().Processors.In == 6 })
	obs := observe.New(observe.Options{})
	add(t, obs, old)
	reg := newRegistry(t, obs)
	h := obs.Handler(reg)
	if err := old.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	expect(t, h, "/readyz", http.StatusServiceUnavailable, "stopped")

	rebuilt := pushPipeline(t, "orders")
	replace(t, obs, rebuilt)
	push(t, rebuilt, acker.NewRecorder(false), 0, 2)
	wait.For(t, "the rebuilt pipeline's counters in the metrics", func() bool {
		v, _ := find(t, reg, "boulevard_processor_messages_received_total", map[string]string{"pipeline": "orders"})
		return v == 2
	})
	code, body := serveMetrics(t, h)
	if code != http.StatusOK {
		t.Fatalf("/metrics answered %d after Replace, want 200:\n%s", code, body)
	}
	expectSeriesOnce(t, body, `boulevard_pipeline_up{pipeline="orders"}`, 1)
	expectSeriesOnce(t, body, `boulevard_processor_messages_received_total{pipeline="orders"}`, 2)
	if rep := expect(t, h, "/readyz", http.StatusOK, ""); len(rep.Pipelines) != 1 {
		t.Errorf("/readyz after Replace: %+v, want the rebuilt pipeline alone", rep)
	}

	if !obs.Remove("orders") {
		t.Fatal("Remove(orders) = false, want true")
	}
	if obs.Remove("orders") {
		t.Error("Remove(orders) = true a second time, want false")
	}
	if v, ok := find(t, reg, "boulevard_pipeline_up", map[string]string{"pipeline": "orders"}); ok {
		t.Errorf("boulevard_pipeline_up{pipeline=orders} = %v after Remove, want no series", v)
	}
	if reps := obs.Readiness(t.Context()); len(reps) != 0 {
		t.Errorf("/readyz reports %+v after Remove, want nothing", reps)
	}
	third := pushPipeline(t, "orders")
	add(t, obs, third)
	push(t, third, acker.NewRecorder(false), 0, 3)
	wait.For(t, "the third pipeline's counters in the metrics", func() bool {
		v, _ := find(t, reg, "boulevard_processor_messages_received_total", map[string]string{"pipeline": "orders"})
		return v == 3
	})
}

// Guarantee: Remove, RemoveTopic, RemovePulsar, RemoveKafka,
// RemoveTopology and RemoveKafkaTopology take what
// they name out of the metrics and /stats, report whether there was one,
// and let the same name (or source) be added again.
func TestRemoveTakesSourcesAndTopicsOut(t *testing.T) {
	obs := observe.New(observe.Options{})
	reg := newRegistry(t, obs)
	h := memTopic(t, "orders", topic.Options{})
	src := newFixedKafka(kafka.Stats{GroupID: "readers", Members: []kafka.MemberStats{{Stage: "events.producer.0"}}})
	stalls := newFixedKafkaTopology(kafkatopology.Stall{Topic: "orders-hold-5s", Since: time.Now(), Failures: 1})
	for _, err := range []error{obs.AddTopic("orders", h), obs.AddPulsar("billing", fixedPulsar(pulsar.Stats{Consumers: 1})), obs.AddKafka(t.Context(), src),
		obs.AddTopology("orders", fixedTopology(topology.Stats{Acked: 1})), obs.AddKafkaTopology("orders-kafka", stalls)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		metric string
		labels map[string]string
	}{
		{"boulevard_topic_published_total", map[string]string{"topic": "orders"}},
		{"boulevard_pulsar_consumers", map[string]string{"subscription": "billing"}},
		{"boulevard_kafka_generation", map[string]string{"group": "readers"}},
		{"boulevard_topology_messages_acked_total", map[string]string{"topology": "orders"}},
		{"boulevard_topology_release_failures", map[string]string{"backend": "orders-kafka"}},
	} {
		if _, ok := find(t, reg, c.metric, c.labels); !ok {
			t.Errorf("%s%v missing before the removals", c.metric, c.labels)
		}
	}
	if !obs.RemoveTopic("orders") || !obs.RemovePulsar("billing") || !obs.RemoveKafka(src) ||
		!obs.RemoveTopology("orders") || !obs.RemoveKafkaTopology("orders-kafka") {
		t.Fatal("a removal of something added reported false")
	}
	if obs.RemoveTopic("orders") || obs.RemovePulsar("billing") || obs.RemoveKafka(src) ||
		obs.RemoveTopology("orders") || obs.RemoveKafkaTopology("orders-kafka") {
		t.Error("a second removal reported true")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 0 {
		t.Errorf("%d metric families left after every removal, want none (first %s)", len(mfs), mfs[0].GetName())
	}
	if snap := obs.Snapshot(t.Context()); len(snap.Topics)+len(snap.Pulsar)+len(snap.Kafka)+len(snap.Topologies)+len(snap.KafkaTopologies) != 0 {
		t.Errorf("/stats after the removals: %+v, want nothing", snap)
	}
	for _, err := range []error{obs.AddTopic("orders", h), obs.AddPulsar("billing", fixedPulsar(pulsar.Stats{})), obs.AddKafka(t.Context(), src),
		obs.AddTopology("orders", fixedTopology(topology.Stats{})), obs.AddKafkaTopology("orders-kafka", stalls)} {
		if err != nil {
			t.Errorf("adding again after a removal: %v", err)
		}
	}
}

// Guarantee: two Kafka members reporting the same series (two sources of
// one group whose members run in stages of the same name, or a partition
// that two members claim at once during a rebalance) never break
// /metrics: each series is reported once, from the member of the newest
// group generation. Each such duplicate is logged once while it lasts,
// whatever the number of scrapes, and again if it ends and comes back.
func TestKafkaSeriesReportedOnceFromTheNewestGeneration(t *testing.T) {
	stale := kafka.Stats{GroupID: "readers", Members: []kafka.MemberStats{{
		Stage: "events.producer.0", GenerationID: 3,
		Partitions: []kafka.PartitionStats{{Topic: "events", Partition: 0, GenerationID: 3, Lag: 10}, {Topic: "events", Partition: 1, GenerationID: 3, Lag: 11}},
	}}}
	current := kafka.Stats{GroupID: "readers", Members: []kafka.MemberStats{
		{Stage: "events.producer.0", GenerationID: 4, Partitions: []kafka.PartitionStats{{Topic: "events", Partition: 0, GenerationID: 4, Lag: 7}}},
		{Stage: "events.producer.1", GenerationID: 4, Partitions: []kafka.PartitionStats{{Topic: "events", Partition: 1, GenerationID: 4, Lag: 5}}},
	}}
	logs := &logRecorder{}
	obs := observe.New(observe.Options{Logger: slog.New(logs)})
	old, src := newFixedKafka(stale), newFixedKafka(current)
	if err := obs.AddKafka(t.Context(), src, old); err != nil { // the newer source first: the generation decides, not the order
		t.Fatal(err)
	}
	h := obs.Handler(nil)
	var body string
	for range 3 {
		var code int
		if code, body = serveMetrics(t, h); code != http.StatusOK {
			t.Fatalf("/metrics answered %d, want 200:\n%s", code, body)
		}
	}
	expectSeriesOnce(t, body, `boulevard_kafka_generation{group="readers",stage="events.producer.0"}`, 4)
	expectSeriesOnce(t, body, `boulevard_kafka_generation{group="readers",stage="events.producer.1"}`, 4)
	expectSeriesOnce(t, body, `boulevard_kafka_consumer_lag_messages{group="readers",partition="0",topic="events"}`, 7)
	expectSeriesOnce(t, body, `boulevard_kafka_consumer_lag_messages{group="readers",partition="1",topic="events"}`, 5)
	promtoolCheck(t, body)
	member := []string{"readers", "events.producer.0"}
	part := []string{"readers", "events/1", "partitions_count=2"}
	if n, m := len(logs.lines(member...)), len(logs.lines(part...)); n != 1 || m != 1 {
		t.Fatalf("after 3 scrapes, %d log lines on the member's duplicate and %d on partition 1's, want 1 each; logs:\n%s",
			n, m, strings.Join(logs.lines(), "\n"))
	}

	old.st.Store(&kafka.Stats{GroupID: "readers"}) // the stale member leaves
	if code, body := serveMetrics(t, h); code != http.StatusOK {
		t.Fatalf("/metrics answered %d, want 200:\n%s", code, body)
	}
	old.st.Store(&stale) // and comes back
	if code, body := serveMetrics(t, h); code != http.StatusOK {
		t.Fatalf("/metrics answered %d, want 200:\n%s", code, body)
	}
	if n := len(logs.lines(member...)); n != 2 {
		t.Errorf("%d log lines on the member's duplicate after it ended and came back, want 2; logs:\n%s", n, strings.Join(logs.lines(), "\n"))
	}
}

// fakePipeline is a Pipeline whose stats the test sets: an implementation
// of observe.Pipeline other than *pipeline.Pipeline, whose name may change.
type fakePipeline struct {
	st atomic.Pointer[pipeline.Stats]
}

func newFakePipeline(st pipeline.Stats) *fakePipeline {
	f := &fakePipeline{}
	f.set(st)
	return f
}

func (f *fakePipeline) set(st pipeline.Stats) { f.st.Store(&st) }

func (f *fakePipeline) Stats() pipeline.Stats { return *f.st.Load() }

// Guarantee: two added pipelines whose stats give the same name at a
// scrape (a Pipeline implementation that renames itself) never break
// /metrics: the name's series come from one of them, the running one if
// only one runs, else the one added last; the duplicate is logged once.
func TestScrapeReportsTheNewestRunningPipelineOfANameOnce(t *testing.T) {
	logs := &logRecorder{}
	obs := observe.New(observe.Options{Logger: slog.New(logs)})
	started := time.Now()
	running := pipeline.Stats{Name: "orders", Started: started, Processors: pipeline.ProcessorStats{In: 5}}
	stopped := pipeline.Stats{Name: "orders", Started: started, Stopped: true, Processors: pipeline.ProcessorStats{In: 9}}
	first := newFakePipeline(running)
	second := newFakePipeline(pipeline.Stats{Name: "other"})
	add(t, obs, first, second)
	h := obs.Handler(nil)
	for _, c := range []struct {
		name          string
		first, second pipeline.Stats
		up, in        float64
	}{
		{"the running one, added first", running, stopped, 1, 5},
		{"the running one, added last", stopped, running, 1, 5},
		{"neither running: the one added last", stopped, func() pipeline.Stats { s := stopped; s.Processors.In = 3; return s }(), 0, 3},
	} {
		first.set(c.first)
		second.set(c.second)
		code, body := serveMetrics(t, h)
		if code != http.StatusOK {
			t.Fatalf("%s: /metrics answered %d, want 200:\n%s", c.name, code, body)
		}
		expectSeriesOnce(t, body, `boulevard_pipeline_up{pipeline="orders"}`, c.up)
		expectSeriesOnce(t, body, `boulevard_processor_messages_received_total{pipeline="orders"}`, c.in)
	}
	if n := len(logs.lines("pipeline=orders")); n != 1 {
		t.Errorf("%d log lines on the duplicate name over 3 scrapes, want 1; logs:\n%s", n, strings.Join(logs.lines(), "\n"))
	}
}

// Guarantee: a name that three pipelines report at one scrape is one
// duplicate: one log line, however many report it.
func TestANameThreePipelinesReportIsLoggedOnce(t *testing.T) {
	logs := &logRecorder{}
	obs := observe.New(observe.Options{Logger: slog.New(logs)})
	ps := []*fakePipeline{newFakePipeline(pipeline.Stats{Name: "a"}), newFakePipeline(pipeline.Stats{Name: "b"}), newFakePipeline(pipeline.Stats{Name: "c"})}
	for _, p := range ps {
		add(t, obs, p)
		p.set(pipeline.Stats{Name: "orders", Started: time.Now()})
	}
	code, body := serveMetrics(t, obs.Handler(nil))
	if code != http.StatusOK {
		t.Fatalf("/metrics answered %d, want 200:\n%s", code, body)
	}
	expectSeriesOnce(t, body, `boulevard_pipeline_up{pipeline="orders"}`, 1)
	if n := len(logs.lines("pipeline=orders")); n != 1 {
		t.Errorf("%d log lines on the name three pipelines report in one scrape, want 1; logs:\n%s", n, strings.Join(logs.lines(), "\n"))
	}
}

// Guarantee: once Stop returned a *pipeline.ShutdownTimeoutError, having
// given up on a handler that ignores its context, the pipeline is
// reported as not running: boulevard_pipeline_up is 0 and /readyz is 503,
// although that handler has not returned yet.
func TestPipelineUpIsZeroOnceStopGaveUpOnAHandler(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:            "stuck",
		ShutdownTimeout: 50 * time.Millisecond,
		Processors: processor.Options[int, int]{Concurrency: 1, MaxDemand: 1,
			Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				close(entered)
				<-release // a blocking call that ignores its context
				return m.Data, nil
			}},
	})
	if err != nil {
		t.Fatal(err)
	}
	obs := observe.New(observe.Options{})
	add(t, obs, p)
	reg := newRegistry(t, obs)
	h := obs.Handler(reg)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(release)
		select {
		case <-p.Done():
		case <-time.After(wait.Deadline):
			t.Errorf("the pipeline did not finish within %v of its handler's return", wait.Deadline)
		}
	})
	if err := p.Push(context.Background(), message.New(1, acker.Discard, 1)); err != nil {
		t.Fatal(err)
	}
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), wait.Deadline)
	defer cancel()
	var ste *pipeline.ShutdownTimeoutError
	if err := p.Stop(ctx); !errors.As(err, &ste) {
		t.Fatalf("Stop returned %v, want a *pipeline.ShutdownTimeoutError", err)
	}
	if v, ok := find(t, reg, "boulevard_pipeline_up", map[string]string{"pipeline": "stuck"}); !ok || v != 0 {
		t.Errorf("boulevard_pipeline_up = %v (found %v) once Stop gave up, want 0", v, ok)
	}
	expect(t, h, "/readyz", http.StatusServiceUnavailable, "stopped")
}

// Guarantee: a real Prometheus scraping an Observer to which a pipeline
// name was added twice keeps scraping it (its up is 1: no scrape fails),
// sees the name's series once, and follows a rebuilt pipeline swapped in
// with Replace (skipped when prometheus is not installed).
func TestRealPrometheusFollowsAReplacedPipeline(t *testing.T) {
	requirePrometheus(t)
	old := pushPipeline(t, "orders")
	push(t, old, acker.NewRecorder(false), 0, 3)
	wait.For(t, "the old pipeline's processors took 3 messages", func() bool { return old.Stats().Processors.In == 3 })
	obs := observe.New(observe.Options{Logger: slog.New(slog.DiscardHandler)})
	add(t, obs, old)
	_ = obs.Add(t.Context(), pushPipeline(t, "orders")) // refused
	addr := startPrometheus(t, obs.Handler(nil))
	is := func(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
	promEventually(t, addr, `boulevard_processor_messages_received_total{pipeline="orders"}`, is(3))
	promEventually(t, addr, `count(boulevard_pipeline_up{pipeline="orders"})`, is(1))
	if v, err := promQuery(addr, `min_over_time(up{job="boulevard"}[1m])`); err != nil || v != 1 {
		t.Errorf(`min_over_time(up[1m]) = %v (%v), want 1: every scrape succeeded`, v, err)
	}

	if err := old.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	rebuilt := pushPipeline(t, "orders")
	push(t, rebuilt, acker.NewRecorder(false), 0, 5)
	replace(t, obs, rebuilt)
	promEventually(t, addr, `boulevard_processor_messages_received_total{pipeline="orders"}`, is(5))
	promEventually(t, addr, `boulevard_pipeline_up{pipeline="orders"}`, is(1))
	if v, err := promQuery(addr, `min_over_time(up{job="boulevard"}[1m])`); err != nil || v != 1 {
		t.Errorf(`min_over_time(up[1m]) = %v (%v), want 1: every scrape succeeded`, v, err)
	}
}

// Guarantee: /healthz, /readyz and /stats report, for a name that two
// added pipelines give at once, the one pipeline /metrics reports (the
// running one, else the one added last): an older pipeline that stopped,
// even by a fatal error, and whose name a running one took over fails
// neither check and is not listed; the checks and /stats log nothing, so
// the duplicate stays logged once.
func TestChecksAndStatsReportThePipelineOfANameThatMetricsReports(t *testing.T) {
	logs := &logRecorder{}
	obs := observe.New(observe.Options{Logger: slog.New(logs)})
	started := time.Now()
	failed := pipeline.Stats{Name: "orders", Started: started, Stopped: true,
		Err: &producer.RestartError{Stage: "orders.producer.0"}, Processors: pipeline.ProcessorStats{In: 9}}
	running := pipeline.Stats{Name: "orders", Started: started, Processors: pipeline.ProcessorStats{In: 5}}
	old, rebuilt := newFakePipeline(failed), newFakePipeline(pipeline.Stats{Name: "rebuilt"})
	add(t, obs, old, rebuilt)
	rebuilt.set(running) // takes the name over
	h := obs.Handler(nil)
	for _, path := range []string{"/readyz", "/healthz"} {
		rep := expect(t, h, path, http.StatusOK, "")
		if len(rep.Pipelines) != 1 || rep.Pipelines[0].Name != "orders" {
			t.Errorf("%s: %+v, want orders once", path, rep)
		}
	}
	snap := obs.Snapshot(t.Context())
	if len(snap.Pipelines) != 1 || snap.Pipelines[0].Processors.In != 5 || snap.Pipelines[0].Stopped {
		t.Errorf("/stats pipelines: %+v, want the running orders (5 received) alone", snap.Pipelines)
	}
	code, body := serveMetrics(t, h)
	if code != http.StatusOK {
		t.Fatalf("/metrics answered %d, want 200:\n%s", code, body)
	}
	expectSeriesOnce(t, body, `boulevard_processor_messages_received_total{pipeline="orders"}`, 5)

	old.set(running) // only the one added first runs: it is the one reported
	rebuilt.set(func() pipeline.Stats { s := failed; s.Processors.In = 3; return s }())
	if rep := expect(t, h, "/readyz", http.StatusOK, ""); len(rep.Pipelines) != 1 {
		t.Errorf("/readyz: %+v, want orders once", rep)
	}
	old.set(failed) // neither runs: the one added last
	if rep := expect(t, h, "/healthz", http.StatusServiceUnavailable, "fatal error"); len(rep.Pipelines) != 1 {
		t.Errorf("/healthz: %+v, want orders once", rep)
	}
	if snap := obs.Snapshot(t.Context()); len(snap.Pipelines) != 1 || snap.Pipelines[0].Processors.In != 3 {
		t.Errorf("/stats pipelines: %+v, want the orders added last (3 received) alone", snap.Pipelines)
	}
	if n := len(logs.lines("pipeline=orders")); n != 1 {
		t.Errorf("%d log lines on the duplicate name, want 1 (the scrape's); logs:\n%s", n, strings.Join(logs.lines(), "\n"))
	}
}

// Guarantee: /stats lists the Kafka series /metrics reports when two
// members report the same ones: each partition once, from the claim of
// the newest generation (a partition only an older member claims is
// listed under it), and a member whose series and claims all went to
// newer members not at all.
func TestStatsListsTheKafkaClaimsThatMetricsReports(t *testing.T) {
	stale := kafka.Stats{GroupID: "readers", Members: []kafka.MemberStats{
		{Stage: "events.producer.0", GenerationID: 3, Partitions: []kafka.PartitionStats{
			{Topic: "events", Partition: 0, GenerationID: 3, Lag: 10}, {Topic: "events", Partition: 2, GenerationID: 3, Lag: 12}}},
		{Stage: "events.producer.1", GenerationID: 3, Partitions: []kafka.PartitionStats{{Topic: "events", Partition: 1, GenerationID: 3, Lag: 11}}},
	}}
	current := kafka.Stats{GroupID: "readers", Members: []kafka.MemberStats{
		{Stage: "events.producer.0", GenerationID: 4, Partitions: []kafka.PartitionStats{{Topic: "events", Partition: 0, GenerationID: 4, Lag: 7}}},
		{Stage: "events.producer.1", GenerationID: 4, Partitions: []kafka.PartitionStats{{Topic: "events", Partition: 1, GenerationID: 4, Lag: 5}}},
	}}
	obs := observe.New(observe.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := obs.AddKafka(t.Context(), newFixedKafka(stale), newFixedKafka(current)); err != nil {
		t.Fatal(err)
	}
	code, body := serveMetrics(t, obs.Handler(nil))
	if code != http.StatusOK {
		t.Fatalf("/metrics answered %d, want 200:\n%s", code, body)
	}
	lag := `boulevard_kafka_consumer_lag_messages{group="readers",partition="%d",topic="events"}`
	expectSeriesOnce(t, body, fmt.Sprintf(lag, 0), 7)
	expectSeriesOnce(t, body, fmt.Sprintf(lag, 1), 5)
	expectSeriesOnce(t, body, fmt.Sprintf(lag, 2), 12)

	var members, parts []string
	for _, k := range obs.Snapshot(t.Context()).Kafka {
		for _, m := range k.Members {
			members = append(members, fmt.Sprintf("%s@%d", m.Stage, m.GenerationID))
			for _, p := range m.Partitions {
				parts = append(parts, fmt.Sprintf("%s/%d lag %d by %s", p.Topic, p.Partition, p.Lag, m.Stage))
			}
		}
	}
	slices.Sort(members)
	slices.Sort(parts)
	if want := []string{"events.producer.0@3", "events.producer.0@4", "events.producer.1@4"}; !slices.Equal(members, want) {
		t.Errorf("/stats Kafka members %v, want %v", members, want)
	}
	if want := []string{"events/0 lag 7 by events.producer.0", "events/1 lag 5 by events.producer.1", "events/2 lag 12 by events.producer.0"}; !slices.Equal(parts, want) {
		t.Errorf("/stats Kafka partitions %v, want %v", parts, want)
	}
}

// replace swaps p in for the pipeline of its name, which must have been
// added.
func replace(t *testing.T, obs *observe.Observer, p observe.Pipeline) {
	t.Helper()
	if replaced, err := obs.Replace(t.Context(), p); err != nil || !replaced {
		t.Fatalf("Replace(%s) = %v, %v; want true: a pipeline of that name was added", p.Stats().Name, replaced, err)
	}
}
