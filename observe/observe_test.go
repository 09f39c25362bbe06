package observe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
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

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// rcrowley/go-metrics (used by sarama for its metric registry)
		// starts one process-wide meter ticker on first use and offers no
		// way to stop it.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}

// pushPipeline is a started push-only pipeline with one batcher; every
// message whose payload is odd fails in the processor.
func pushPipeline(t *testing.T, name string) *pipeline.Pipeline[int, int] {
	t.Helper()
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name: name,
		Processors: processor.Options[int, int]{
			Concurrency: 2,
			Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				if m.Data%2 == 1 {
					return 0, errors.New("odd")
				}
				return m.Data, nil
			},
		},
		Batchers: []batcher.Options[int]{{
			Name: "default", BatchSize: 5, BatchTimeout: 10 * time.Millisecond,
			Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil },
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	return p
}

func push(t *testing.T, p *pipeline.Pipeline[int, int], rec *acker.Recorder, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := from; i < from+n; i++ {
		if err := p.Push(ctx, message.New(i, rec, uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
}

// find returns the value of the metric name with the given label values
// (a subset of its labels), and whether it was found.
func find(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// Guarantee: the collector reports each stage's counters under the
// documented names and labels, with the values Pipeline.Stats holds, and
// its output passes client_golang's linter.
func TestCollectorReportsPipelineStats(t *testing.T) {
	p := pushPipeline(t, "orders")
	rec := acker.NewRecorder(false)
	push(t, p, rec, 0, 40)
	wait.For(t, "every message acknowledged", func() bool { return rec.Total() == 40 })
	obs := observe.New(observe.Options{})
	add(t, obs, p)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(obs)
	want := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"boulevard_pipeline_up", map[string]string{"pipeline": "orders"}, 1},
		{"boulevard_processor_messages_received_total", map[string]string{"pipeline": "orders"}, 40},
		{"boulevard_processor_messages_succeeded_total", map[string]string{"pipeline": "orders"}, 20},
		{"boulevard_processor_messages_failed_total", map[string]string{"pipeline": "orders", "disposition": "default"}, 20},
		{"boulevard_processor_messages_failed_total", map[string]string{"pipeline": "orders", "disposition": "discard"}, 0},
		{"boulevard_processor_concurrency", map[string]string{"pipeline": "orders"}, 2},
		{"boulevard_batcher_messages_received_total", map[string]string{"pipeline": "orders", "batcher": "default"}, 20},
		{"boulevard_batcher_messages_succeeded_total", map[string]string{"pipeline": "orders", "batcher": "default"}, 20},
		{"boulevard_batcher_messages_in_flight", map[string]string{"pipeline": "orders", "batcher": "default"}, 0},
	}
	// A stage counts a message once it has passed it on, so a counter may
	// trail the acknowledgement by a moment: wait for them all to settle.
	mismatches := func() string {
		var bad []string
		for _, c := range want {
			if got, ok := find(t, reg, c.name, c.labels); !ok || got != c.want {
				bad = append(bad, fmt.Sprintf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want))
			}
		}
		return strings.Join(bad, "; ")
	}
	wait.For(t, "every stage's counters to match what the pipeline did", func() bool { return mismatches() == "" }, mismatches)
	if n, ok := find(t, reg, "boulevard_batcher_batch_size_messages", map[string]string{"batcher": "default"}); !ok || n == 0 {
		t.Errorf("batch size histogram has %v observations (found %v), want some", n, ok)
	}
	if n, ok := find(t, reg, "boulevard_processor_handler_duration_seconds", nil); !ok || n == 0 {
		t.Errorf("handler duration histogram has %v observations (found %v), want some", n, ok)
	}
	problems, err := testutil.CollectAndLint(obs)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("lint: %s: %s", pr.Metric, pr.Text)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, _ := find(t, reg, "boulevard_pipeline_up", nil); v != 0 {
		t.Errorf("boulevard_pipeline_up = %v after Stop, want 0", v)
	}
}

// Guarantee: boulevard_pipeline_up is 1 only while the pipeline runs, as
// documented: 0 for a pipeline added before it was started (or never
// started), 1 once started, 0 again once stopped.
func TestPipelineUpOnlyWhileRunning(t *testing.T) {
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:       "later",
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	obs := observe.New(observe.Options{})
	add(t, obs, p)
	reg := newRegistry(t, obs)
	if v, ok := find(t, reg, "boulevard_pipeline_up", map[string]string{"pipeline": "later"}); !ok || v != 0 {
		t.Errorf("boulevard_pipeline_up = %v (found %v) before Start, want 0", v, ok)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, _ := find(t, reg, "boulevard_pipeline_up", nil); v != 1 {
		t.Errorf("boulevard_pipeline_up = %v while running, want 1", v)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, _ := find(t, reg, "boulevard_pipeline_up", nil); v != 0 {
		t.Errorf("boulevard_pipeline_up = %v after Stop, want 0", v)
	}
}

// Guarantee: promtool, Prometheus's own checker, accepts the /metrics
// output, a topology source's and a Kafka topology backend's stalls
// included (skipped when promtool is not installed).
func TestMetricsPassPromtool(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Skip("promtool not installed (Debian package prometheus); .ci/run installs it")
	}
	p := pushPipeline(t, "checked")
	rec := acker.NewRecorder(false)
	push(t, p, rec, 0, 10)
	wait.For(t, "every message acknowledged", func() bool { return rec.Total() == 10 })
	obs := observe.New(observe.Options{})
	add(t, obs, p)
	if err := obs.AddTopology("orders", fixedTopology(topology.Stats{Received: 12, Acked: 9, Retried: 3, DeadLettered: 1, Subscriptions: 1})); err != nil {
		t.Fatal(err)
	}
	stall := kafkatopology.Stall{Topic: "orders-hold-5s", Partition: 0, Since: time.Now().Add(-time.Minute), Failures: 4}
	if err := obs.AddKafkaTopology("orders-kafka", newFixedKafkaTopology(stall)); err != nil {
		t.Fatal(err)
	}
	code, body := serveMetrics(t, obs.Handler(nil))
	for _, m := range []string{"boulevard_processor_messages_received_total", "boulevard_topology_messages_retried_total", "boulevard_topology_release_stalled_seconds"} {
		if code != http.StatusOK || !strings.Contains(body, m) {
			t.Fatalf("/metrics answered %d without %s:\n%s", code, m, body)
		}
	}
	promtoolCheck(t, body)
}

// add adds pipelines to obs, failing the test if Add refuses them.
func add(t *testing.T, obs *observe.Observer, pipelines ...observe.Pipeline) {
	t.Helper()
	if err := obs.Add(t.Context(), pipelines...); err != nil {
		t.Fatal(err)
	}
}

// memTopic creates the in-memory topic name with opts on a broker of its
// own, closed when t ends.
func memTopic(t *testing.T, name topic.Name, opts topic.Options) *topic.Handle[int] {
	t.Helper()
	broker := topic.NewBroker[int]()
	t.Cleanup(broker.Close)
	h, err := broker.CreateInMemoryTopic(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// serveMetrics serves h on a real HTTP server (on 127.0.0.1) for one GET
// of /metrics and returns the status code and the body.
func serveMetrics(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	return serveGet(t, h, "/metrics")
}

// serveGet serves h on a real HTTP server (on 127.0.0.1) for one GET of
// path and returns the status code and the body. A handler that panics
// fails the test (the server ends the connection).
func serveGet(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// promtoolCheck runs `promtool check metrics` on a /metrics body, failing
// the test if promtool refuses it; it checks nothing when promtool is not
// installed.
func promtoolCheck(t *testing.T, body string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed: the output is not checked by it")
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// newRegistry returns a pedantic registry holding c.
func newRegistry(t *testing.T, c prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	return reg
}

// Guarantee: once a pipeline whose drain was cut short has stopped, no
// message is left counted in flight: boulevard_batcher_messages_in_flight
// is 0 and what the hard stop left unacknowledged in the batcher (the
// batches its batch processor never handled) is counted in
// boulevard_batcher_messages_unhandled_total, as the processors count
// theirs in boulevard_processor_messages_unhandled_total; a message its
// processor acknowledged already (AckImmediately) left there is counted
// in boulevard_batcher_messages_dropped_total instead.
func TestBatcherInFlightIsZeroAfterACutShortDrain(t *testing.T) {
	var started atomic.Bool
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:            "cut",
		ShutdownTimeout: 100 * time.Millisecond, // the handler below only returns once it passes
		Processors: processor.Options[int, int]{Concurrency: 1,
			Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				if m.Data == 3 {
					m.AckImmediately()
				}
				return m.Data, nil
			}},
		Batchers: []batcher.Options[int]{{
			Name: "default", BatchSize: 2, BatchTimeout: time.Hour, Concurrency: 1,
			Handle: func(ctx context.Context, _ []*message.Message[int], _ message.BatchInfo) error {
				started.Store(true)
				<-ctx.Done() // holds the first batch until the drain is cut short
				return ctx.Err()
			},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := startObserved(t, p)
	rec := acker.NewRecorder(false)
	push(t, p, rec, 0, 5) // batches {0,1} (in the handler), {2,3} (queued), {4} (open)
	wait.For(t, "the first batch in the batch handler", started.Load)
	labels := map[string]string{"pipeline": "cut", "batcher": "default"}
	wait.For(t, "every message taken in by the batcher", func() bool {
		v, _ := find(t, reg, "boulevard_batcher_messages_received_total", labels)
		return v == 5
	})
	stopCutShort(t, p)
	if got := rec.Total(); got != 3 {
		t.Fatalf("%d messages acknowledged, want 3 (the interrupted batch, and 3 by its processor)", got)
	}
	if v, ok := find(t, reg, "boulevard_batcher_messages_in_flight", labels); !ok || v != 0 {
		t.Errorf("boulevard_batcher_messages_in_flight = %v (found %v) once the pipeline stopped, want 0", v, ok)
	}
	if v, ok := find(t, reg, "boulevard_batcher_messages_unhandled_total", labels); !ok || v != 2 {
		t.Errorf("boulevard_batcher_messages_unhandled_total = %v (found %v), want 2 (2 of batch {2,3}, and {4})", v, ok)
	}
	if v, ok := find(t, reg, "boulevard_batcher_messages_dropped_total", labels); !ok || v != 1 {
		t.Errorf("boulevard_batcher_messages_dropped_total = %v (found %v), want 1 (3, acknowledged by its processor)", v, ok)
	}
}

// heldSource delivers n messages to one feed, then waits for its run to
// be cancelled.
type heldSource struct {
	producer.Basic
	n   int
	rec *acker.Recorder
}

func (s heldSource) Run(ctx context.Context, st *producer.Stage[int]) error {
	feed := st.NewFeed("held", nil)
	msgs := make([]*message.Message[int], s.n)
	for i := range msgs {
		msgs[i] = message.New(i, s.rec, uint64(i))
	}
	feed.Deliver(msgs...)
	<-ctx.Done()
	return nil
}

// Guarantee: what a drain cut short leaves in a producer stage's buffer is
// counted in boulevard_producer_messages_unhandled_total, per stage.
func TestProducerUnhandledCountsWhatACutLeftInTheStage(t *testing.T) {
	var started atomic.Bool
	rec := acker.NewRecorder(false)
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:            "held",
		ShutdownTimeout: 100 * time.Millisecond, // the handler below only returns once it passes
		Producer: producer.Options[int]{
			Source: heldSource{n: 5, rec: rec},
			// One message passes; the four others wait in the stage buffer.
			RateLimit: &producer.RateLimit{Allowed: 1, Interval: time.Hour},
		},
		Processors: processor.Options[int, int]{Concurrency: 1,
			Handle: func(ctx context.Context, m *message.Message[int]) (int, error) {
				started.Store(true)
				<-ctx.Done() // holds the first message until the drain is cut short
				return m.Data, ctx.Err()
			}},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := startObserved(t, p)
	wait.For(t, "the first message in the handler", started.Load)
	labels := map[string]string{"pipeline": "held", "stage": "held.producer.0"}
	wait.For(t, "four messages in the stage buffer", func() bool {
		v, _ := find(t, reg, "boulevard_producer_buffered_messages", labels)
		return v == 4
	})
	stopCutShort(t, p)
	<-p.Done()
	if v, ok := find(t, reg, "boulevard_producer_messages_unhandled_total", labels); !ok || v != 4 {
		t.Errorf("boulevard_producer_messages_unhandled_total = %v (found %v), want 4", v, ok)
	}
	if got := rec.Total(); got != 1 {
		t.Errorf("%d messages acknowledged, want 1 (the interrupted one)", got)
	}
}

// startObserved adds p to a new Observer, registers it and starts p; it
// returns the registry.
func startObserved(t *testing.T, p *pipeline.Pipeline[int, int]) *prometheus.Registry {
	t.Helper()
	obs := observe.New(observe.Options{})
	add(t, obs, p)
	reg := newRegistry(t, obs)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return reg
}

// stopCutShort stops p, whose shutdown timeout must cut its drain short.
func stopCutShort(t *testing.T, p *pipeline.Pipeline[int, int]) {
	t.Helper()
	if err := p.Stop(context.Background()); !errors.Is(err, pipeline.ErrShutdownTimeout) {
		t.Fatalf("Stop returned %v, want ErrShutdownTimeout", err)
	}
}
