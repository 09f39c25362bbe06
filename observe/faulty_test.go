package observe_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/kafkatopology"
)

// Modes of a faulty Stats.
const (
	statsAnswer int32 = iota
	statsPanic
	statsBlock
	statsExit
)

// faulty is a Stats method of the caller's (a pipeline, a Kafka source, a
// topic or a Pulsar source) that returns st, panics, blocks until release
// is closed or ends its goroutine (runtime.Goexit), as its mode says.
type faulty[S any] struct {
	st      S
	mode    atomic.Int32
	release chan struct{}
	unblock func() // closes release, once
	// faulted counts the calls made in a mode other than statsAnswer.
	faulted atomic.Int32
}

func newFaulty[S any](st S) *faulty[S] {
	release := make(chan struct{})
	return &faulty[S]{st: st, release: release, unblock: sync.OnceFunc(func() { close(release) })}
}

func (f *faulty[S]) Stats() S {
	switch f.mode.Load() {
	case statsPanic:
		f.faulted.Add(1)
		panic("the stats are broken")
	case statsBlock:
		f.faulted.Add(1)
		<-f.release
	case statsExit:
		f.faulted.Add(1)
		runtime.Goexit()
	}
	return f.st
}

func (f *faulty[S]) setMode(m int32) { f.mode.Store(m) }

// decodeSnapshot decodes a /stats body.
func decodeSnapshot(t *testing.T, body string) observe.Snapshot {
	t.Helper()
	var snap observe.Snapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatalf("/stats body %q is not a JSON snapshot: %v", body, err)
	}
	return snap
}

// reportOf decodes a /healthz or /readyz body into the report of each
// pipeline by name.
func reportOf(t *testing.T, body string) map[string]observe.PipelineReport {
	t.Helper()
	var rep observe.Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatalf("body %q is not a JSON report: %v", body, err)
	}
	out := map[string]observe.PipelineReport{}
	for _, p := range rep.Pipelines {
		out[p.Name] = p
	}
	return out
}

// Guarantee: a Stats of the caller's that panics (a pipeline's, a Kafka
// source's, a topic's, a Pulsar source's, a topology source's or a Kafka
// topology backend's) never panics the process or
// an endpoint: /metrics answers 200 with the series of everything else
// and logs one line per scrape naming each one that failed; /healthz and
// /readyz fail the pipeline whose Stats panicked, the panic in its
// reason, and report the others; /stats lists the failures with the
// stats of the rest.
func TestAStatsThatPanicsFailsOnlyWhatItReports(t *testing.T) {
	logs := &logRecorder{}
	obs := observe.New(observe.Options{Logger: slog.New(logs)})
	bad := newFaulty(pipeline.Stats{Name: "bad", Started: time.Now()})
	good := newFaulty(pipeline.Stats{Name: "good", Started: time.Now()})
	add(t, obs, bad, good)
	group := newFaulty(kafka.Stats{GroupID: "billing"})
	if err := obs.AddKafka(t.Context(), group); err != nil {
		t.Fatal(err)
	}
	events, clicks := newFaulty(topic.Stats{Published: 3}), newFaulty(topic.Stats{Published: 7})
	for name, tp := range map[string]observe.Topic{"events": events, "clicks": clicks} {
		if err := obs.AddTopic(name, tp); err != nil {
			t.Fatal(err)
		}
	}
	audit := newFaulty(pulsar.Stats{Received: 5})
	if err := obs.AddPulsar("audit", audit); err != nil {
		t.Fatal(err)
	}
	retries, stalls := newFaulty(topology.Stats{Acked: 4}), newFaulty(kafkatopology.Stats{})
	if err := errors.Join(obs.AddTopology("retries", retries), obs.AddTopology("settled", newFaulty(topology.Stats{Acked: 9})),
		obs.AddKafkaTopology("stalls", stalls)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []interface{ setMode(int32) }{bad, group, events, audit, retries, stalls} {
		f.setMode(statsPanic)
	}
	h := obs.Handler(nil)
	failed := []string{"Stats panicked", `pipeline "bad"`, "Kafka source 0", `topic "events"`, `Pulsar subscription "audit"`,
		`topology "retries"`, `Kafka topology backend "stalls"`}

	for scrape := 1; scrape <= 2; scrape++ {
		code, body := serveMetrics(t, h)
		if code != http.StatusOK {
			t.Fatalf("scrape %d: /metrics answered %d, want 200:\n%s", scrape, code, body)
		}
		expectSeriesOnce(t, body, `boulevard_pipeline_up{pipeline="good"}`, 1)
		expectSeriesOnce(t, body, `boulevard_topic_published_total{topic="clicks"}`, 7)
		expectSeriesOnce(t, body, `boulevard_topology_messages_acked_total{topology="settled"}`, 9)
		if strings.Contains(body, `"bad"`) || strings.Contains(body, `"events"`) || strings.Contains(body, `"audit"`) ||
			strings.Contains(body, `"retries"`) || strings.Contains(body, `"stalls"`) {
			t.Errorf("scrape %d: /metrics has series of what failed:\n%s", scrape, body)
		}
		promtoolCheck(t, body)
		if n := len(logs.lines(failed...)); n != scrape {
			t.Errorf("after scrape %d, %d log lines naming everything that failed, want %d; logs:\n%s",
				scrape, n, scrape, strings.Join(logs.lines(), "\n"))
		}
	}

	for _, path := range []string{"/healthz", "/readyz"} {
		code, body := serveGet(t, h, path)
		if code != http.StatusServiceUnavailable {
			t.Errorf("%s answered %d, want 503:\n%s", path, code, body)
		}
		rep := reportOf(t, body)
		if r := rep["bad"]; r.OK || !strings.Contains(r.Reason, "Stats panicked: the stats are broken") {
			t.Errorf("%s: the pipeline whose Stats panicked is reported %+v, want failed by the panic", path, r)
		}
		if r := rep["good"]; !r.OK {
			t.Errorf("%s: the other pipeline is reported %+v, want OK", path, r)
		}
	}

	code, body := serveGet(t, h, "/stats")
	if code != http.StatusOK {
		t.Fatalf("/stats answered %d, want 200:\n%s", code, body)
	}
	snap := decodeSnapshot(t, body)
	if len(snap.Pipelines) != 1 || snap.Pipelines[0].Name != "good" || len(snap.Kafka) != 0 ||
		len(snap.Topics) != 1 || snap.Topics[0].Name != "clicks" || len(snap.Pulsar) != 0 ||
		len(snap.Topologies) != 1 || snap.Topologies[0].Name != "settled" || len(snap.KafkaTopologies) != 0 {
		t.Errorf("/stats reports %+v, want the pipeline good, the topic clicks and the topology source settled alone", snap)
	}
	if len(snap.Failed) != 6 {
		t.Errorf("/stats lists the failures %q, want the 6 whose Stats panicked", snap.Failed)
	}
}

// blockingCollector is a collector of the caller's whose Collect blocks
// until release is closed.
type blockingCollector struct {
	desc    *prometheus.Desc
	release chan struct{}
}

func (c blockingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c blockingCollector) Collect(chan<- prometheus.Metric) { <-c.release }

// record serves one GET of path with h, in the test's goroutine, and
// returns the status code, the body and how long it took.
func record(h http.Handler, path string) (int, string, time.Duration) {
	start := time.Now()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w.Code, w.Body.String(), time.Since(start)
}

// Guarantee: a Stats of the caller's that blocks never hangs an
// endpoint: /metrics, /healthz, /readyz and /stats answer within
// Options.StatsTimeout, with what blocks reported failed and the rest
// served; while that Stats has not returned, later reads report it
// failed at once and do not call it again, and once it has returned the
// next read reads it. A collector of the caller's that blocks makes
// /metrics answer 500 within twice StatsTimeout, logged once.
func TestAStatsThatBlocksFailsOnlyWhatItReportsWithinTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 3 * time.Second
		logs := &logRecorder{}
		obs := observe.New(observe.Options{Logger: slog.New(logs), StatsTimeout: timeout})
		stuck := newFaulty(pipeline.Stats{Name: "stuck", Started: time.Now()})
		good := newFaulty(pipeline.Stats{Name: "good", Started: time.Now()})
		add(t, obs, stuck, good)
		stuck.setMode(statsBlock)
		defer stuck.unblock() // so that the bubble's goroutines end when the test fails
		h := obs.Handler(nil)

		code, body, took := record(h, "/metrics")
		if code != http.StatusOK || took > timeout {
			t.Fatalf("/metrics answered %d after %v, want 200 within %v:\n%s", code, took, timeout, body)
		}
		expectSeriesOnce(t, body, `boulevard_pipeline_up{pipeline="good"}`, 1)
		if strings.Contains(body, `"stuck"`) {
			t.Errorf("/metrics has series of the pipeline whose Stats blocks:\n%s", body)
		}
		if n := len(logs.lines("did not return", `pipeline "stuck"`)); n != 1 {
			t.Errorf("%d log lines naming the pipeline whose Stats blocks, want 1; logs:\n%s", n, strings.Join(logs.lines(), "\n"))
		}

		for _, path := range []string{"/healthz", "/readyz"} {
			code, body, took := record(h, path)
			if code != http.StatusServiceUnavailable || took != 0 {
				t.Errorf("%s answered %d after %v, want 503 at once:\n%s", path, code, took, body)
			}
			rep := reportOf(t, body)
			if r := rep["stuck"]; r.OK || !strings.Contains(r.Reason, "has not returned since") {
				t.Errorf("%s: the pipeline whose Stats blocks is reported %+v, want failed", path, r)
			}
			if r := rep["good"]; !r.OK {
				t.Errorf("%s: the other pipeline is reported %+v, want OK", path, r)
			}
		}
		code, body, _ = record(h, "/stats")
		snap := decodeSnapshot(t, body)
		if code != http.StatusOK || len(snap.Pipelines) != 1 || len(snap.Failed) != 1 || !strings.Contains(snap.Failed[0], `pipeline "stuck"`) {
			t.Errorf("/stats answered %d %+v, want 200 with the pipeline good and the failure of stuck", code, snap)
		}
		if n := stuck.faulted.Load(); n != 1 {
			t.Errorf("the Stats that blocks was called %d times, want once while it has not returned", n)
		}

		stuck.setMode(statsAnswer)
		stuck.unblock()
		synctest.Wait()
		code, body, _ = record(h, "/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics answered %d once the Stats returned, want 200:\n%s", code, body)
		}
		expectSeriesOnce(t, body, `boulevard_pipeline_up{pipeline="stuck"}`, 1)

		reg := prometheus.NewRegistry()
		reg.MustRegister(obs)
		own := blockingCollector{prometheus.NewDesc("app_rows", "Rows in the table.", nil, nil), make(chan struct{})}
		reg.MustRegister(own)
		defer close(own.release)
		code, body, took = record(obs.Handler(reg), "/metrics")
		if code != http.StatusInternalServerError || took > 2*timeout || !strings.Contains(body, "timed out") {
			t.Errorf("/metrics with a collector that blocks answered %d after %v, want 500 within %v:\n%s", code, took, 2*timeout, body)
		}
		if n := len(logs.lines("gathering the metrics timed out")); n != 1 {
			t.Errorf("%d log lines on the gathering that timed out, want 1; logs:\n%s", n, strings.Join(logs.lines(), "\n"))
		}
	})
}

// expectAddError fails t unless err wraps each of want and names each of
// names.
func expectAddError(t *testing.T, what string, err error, want []error, names ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s returned nil, want an error wrapping %v", what, want)
		return
	}
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Errorf("%s: error %q does not wrap %v", what, err, w)
		}
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("%s: error %q does not name %s", what, err, n)
		}
	}
}

// panicsWith is a pipeline whose Stats panics with err.
type panicsWith struct{ err error }

func (p panicsWith) Stats() pipeline.Stats { panic(p.err) }

// Guarantee: the error of a Stats that panicked carries the panic as the
// rest of the module does: errors.As finds its *message.PanicError, and
// errors.Is the error it panicked with, besides ErrStats.
func TestTheErrorOfAStatsThatPanickedCarriesThePanic(t *testing.T) {
	broken := errors.New("the stats are broken")
	err := observe.New(observe.Options{}).Add(t.Context(), panicsWith{broken})
	expectAddError(t, "Add", err, []error{observe.ErrStats, broken}, "pipelines[0]", "Stats panicked: the stats are broken")
	if pe, ok := errors.AsType[*message.PanicError](err); !ok || pe.Value != broken || len(pe.Stack) == 0 {
		t.Errorf("Add = %v, want an error wrapping the *message.PanicError of the panic, with its stack", err)
	}
}

// Guarantee: a Stats of the caller's that panics when Add, Replace or
// AddKafka reads it never panics the caller: Add and Replace add
// nothing and return an error wrapping ErrStats with the panic, Add's
// naming the pipeline by its place among its arguments; AddKafka
// refuses a duplicate whose Stats panics with an error wrapping
// ErrDuplicate and ErrStats that names it by its place.
func TestAddingWhatHasAStatsThatPanicsReturnsAnError(t *testing.T) {
	obs := observe.New(observe.Options{})
	bad := newFaulty(pipeline.Stats{Name: "bad", Started: time.Now()})
	good := newFaulty(pipeline.Stats{Name: "good", Started: time.Now()})
	bad.setMode(statsPanic)

	err := obs.Add(t.Context(), good, bad)
	expectAddError(t, "Add", err, []error{observe.ErrStats}, "pipelines[1]", "Stats panicked: the stats are broken")
	replaced, err := obs.Replace(t.Context(), bad)
	expectAddError(t, "Replace", err, []error{observe.ErrStats}, "the pipeline", "Stats panicked: the stats are broken")
	if replaced {
		t.Error("Replace of a pipeline whose Stats panics reports a pipeline replaced")
	}
	if snap := obs.Snapshot(t.Context()); len(snap.Pipelines) != 0 || len(snap.Failed) != 0 {
		t.Errorf("after Add and Replace failed, the Observer reports %+v, want nothing added", snap)
	}

	group := newFaulty(kafka.Stats{GroupID: "billing"})
	if err := obs.AddKafka(t.Context(), group); err != nil {
		t.Fatal(err)
	}
	group.setMode(statsPanic)
	err = obs.AddKafka(t.Context(), newFaulty(kafka.Stats{GroupID: "audit"}), group)
	expectAddError(t, "AddKafka of a source added", err, []error{observe.ErrDuplicate, observe.ErrStats}, "sources[1]", "Stats panicked")

	bad.setMode(statsAnswer)
	add(t, obs, good, bad)
	if snap := obs.Snapshot(t.Context()); len(snap.Pipelines) != 2 {
		t.Errorf("once its Stats answers, Add added %+v, want both pipelines", snap.Pipelines)
	}
}

// Guarantee: a Stats of the caller's that blocks when Add, Replace or
// AddKafka reads it does not hang the caller: each returns within
// Options.StatsTimeout, Add and Replace adding nothing, with an error
// wrapping ErrStats (Replace at once, with ErrStatsPending, as the Add
// before it gave up on the same Stats), and AddKafka refusing a
// duplicate whose Stats blocks with an error wrapping ErrDuplicate and
// ErrStats. Once the Stats returns, Add adds the pipeline.
func TestAddingWhatHasAStatsThatBlocksReturnsWithinTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 3 * time.Second
		obs := observe.New(observe.Options{StatsTimeout: timeout})
		stuck := newFaulty(pipeline.Stats{Name: "stuck", Started: time.Now()})
		good := newFaulty(pipeline.Stats{Name: "good", Started: time.Now()})
		stuck.setMode(statsBlock)
		defer stuck.unblock() // so that the bubble's goroutines end when the test fails

		start := time.Now()
		err := obs.Add(t.Context(), good, stuck)
		if took := time.Since(start); took > timeout {
			t.Errorf("Add returned after %v, want within %v", took, timeout)
		}
		expectAddError(t, "Add", err, []error{observe.ErrStats}, "pipelines[1]", "did not return within 3s")
		start = time.Now()
		replaced, err := obs.Replace(t.Context(), stuck)
		if took := time.Since(start); took != 0 || replaced {
			t.Errorf("Replace returned replaced=%v after %v, want false at once: the Add before it gave up on the same Stats", replaced, took)
		}
		expectAddError(t, "Replace", err, []error{observe.ErrStats, observe.ErrStatsPending}, "the pipeline", "has not returned since")
		if snap := obs.Snapshot(t.Context()); len(snap.Pipelines) != 0 || len(snap.Failed) != 0 {
			t.Errorf("after Add and Replace failed, the Observer reports %+v, want nothing added", snap)
		}

		group := newFaulty(kafka.Stats{GroupID: "billing"})
		if err := obs.AddKafka(t.Context(), group); err != nil {
			t.Fatal(err)
		}
		group.setMode(statsBlock)
		defer group.unblock()
		start = time.Now()
		err = obs.AddKafka(t.Context(), group)
		if took := time.Since(start); took > timeout {
			t.Errorf("AddKafka returned after %v, want within %v", took, timeout)
		}
		expectAddError(t, "AddKafka of a source added", err, []error{observe.ErrDuplicate, observe.ErrStats}, "sources[0]", "did not return within 3s")

		stuck.setMode(statsAnswer)
		stuck.unblock()
		synctest.Wait()
		add(t, obs, good, stuck)
		if snap := obs.Snapshot(t.Context()); len(snap.Pipelines) != 2 {
			t.Errorf("once its Stats returned, Add added %+v, want both pipelines", snap.Pipelines)
		}
	})
}

// countingCollector is a collector of the caller's whose Collect counts
// its calls and blocks until release is closed.
type countingCollector struct {
	desc    *prometheus.Desc
	release chan struct{}
	calls   atomic.Int32
}

func (c *countingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *countingCollector) Collect(chan<- prometheus.Metric) {
	c.calls.Add(1)
	<-c.release
}

// Guarantee: a collector of the caller's that never returns holds one
// gathering however often /metrics is scraped: while the gathering
// /metrics gave up on has not returned, each later scrape answers 500 at
// once, its error wrapping ErrGatherTimeout and saying since when,
// without gathering again (the collectors are not called again, no
// goroutine is added); once it has returned, the next scrape gathers and
// answers 200.
func TestAGatherThatNeverReturnsHoldsOneGatheringHoweverOftenScraped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = time.Second
		logs := &logRecorder{}
		obs := observe.New(observe.Options{Logger: slog.New(logs), StatsTimeout: timeout})
		add(t, obs, newFaulty(pipeline.Stats{Name: "orders", Started: time.Now()}))
		reg := prometheus.NewRegistry()
		reg.MustRegister(obs)
		own := &countingCollector{desc: prometheus.NewDesc("app_rows", "Rows in the table.", nil, nil), release: make(chan struct{})}
		reg.MustRegister(own)
		release := sync.OnceFunc(func() { close(own.release) })
		defer release() // so that the bubble's goroutines end when the test fails
		h := obs.Handler(reg)

		if code, body, took := record(h, "/metrics"); code != http.StatusInternalServerError || took != 2*timeout {
			t.Fatalf("/metrics with a collector that blocks answered %d after %v, want 500 after %v:\n%s", code, took, 2*timeout, body)
		}
		for scrape := 2; scrape <= 6; scrape++ {
			code, body, took := record(h, "/metrics")
			if code != http.StatusInternalServerError || took != 0 || !strings.Contains(body, "has not returned since") {
				t.Errorf("scrape %d while the gathering given up on has not returned answered %d after %v, want 500 at once saying since when:\n%s",
					scrape, code, took, body)
			}
		}
		if n := own.calls.Load(); n != 1 {
			t.Errorf("the collector that blocks was called %d times in 6 scrapes, want once while its gathering has not returned", n)
		}
		if n := len(logs.lines(observe.ErrGatherTimeout.Error())); n != 6 {
			t.Errorf("%d log lines wrapping ErrGatherTimeout after 6 scrapes, want 6; logs:\n%s", n, strings.Join(logs.lines(), "\n"))
		}

		release()
		synctest.Wait()
		code, body, _ := record(h, "/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics answered %d once the collector returned, want 200:\n%s", code, body)
		}
		expectSeriesOnce(t, body, `boulevard_pipeline_up{pipeline="orders"}`, 1)
		if n := own.calls.Load(); n != 2 {
			t.Errorf("the collector was called %d times, want twice: again once its gathering returned", n)
		}
	})
}

// Guarantee: a Stats of the caller's that ends its goroutine
// (runtime.Goexit, as t.FailNow does) fails what it reports, as a panic
// does: /healthz fails that pipeline, the exit in its reason, rather than
// reporting the zero stats as read, and reports the others.
func TestAStatsThatEndsItsGoroutineFailsWhatItReports(t *testing.T) {
	obs := observe.New(observe.Options{Logger: slog.New(&logRecorder{})})
	bad := newFaulty(pipeline.Stats{Name: "bad", Started: time.Now()})
	good := newFaulty(pipeline.Stats{Name: "good", Started: time.Now()})
	add(t, obs, bad, good)
	bad.setMode(statsExit)
	code, body := serveGet(t, obs.Handler(nil), "/healthz")
	if code != http.StatusServiceUnavailable {
		t.Errorf("/healthz answered %d, want 503:\n%s", code, body)
	}
	rep := reportOf(t, body)
	if r := rep["bad"]; r.OK || !strings.Contains(r.Reason, "Stats ended its goroutine (runtime.Goexit)") {
		t.Errorf("the pipeline whose Stats exited is reported %+v, want failed by the exit; report:\n%s", r, body)
	}
	if r := rep["good"]; !r.OK {
		t.Errorf("the other pipeline is reported %+v, want OK", r)
	}
}

// Guarantee: a Gather of the caller's gatherer that panics or ends its
// goroutine (runtime.Goexit) never ends the process nor passes for an
// empty gathering: /metrics answers 500 at once, its error saying what
// the gatherer did, and the next scrape gathers again.
func TestAGatherThatPanicsOrExitsAnswers500(t *testing.T) {
	for _, tc := range []struct {
		name, says string
		fault      func()
	}{
		{"panic", "Gather panicked: the registry is broken", func() { panic("the registry is broken") }},
		{"exit", "Gather ended its goroutine (runtime.Goexit)", runtime.Goexit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := observe.New(observe.Options{Logger: slog.New(&logRecorder{})})
			add(t, obs, newFaulty(pipeline.Stats{Name: "orders", Started: time.Now()}))
			reg := prometheus.NewRegistry()
			reg.MustRegister(obs)
			var faults atomic.Int32
			h := obs.Handler(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
				if faults.Add(1) == 1 {
					tc.fault()
				}
				return reg.Gather()
			}))
			if code, body, _ := record(h, "/metrics"); code != http.StatusInternalServerError || !strings.Contains(body, tc.says) {
				t.Fatalf("/metrics answered %d, want 500 saying %q:\n%s", code, tc.says, body)
			}
			code, body, _ := record(h, "/metrics")
			if code != http.StatusOK {
				t.Fatalf("the next scrape answered %d, want 200:\n%s", code, body)
			}
			expectSeriesOnce(t, body, `boulevard_pipeline_up{pipeline="orders"}`, 1)
		})
	}
}
