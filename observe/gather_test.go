package observe_test

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/observe"
)

// failingCollector is a collector of the caller's whose Collect fails.
type failingCollector struct{ desc *prometheus.Desc }

func (c failingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c failingCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(c.desc, errors.New("the database is unreachable"))
}

// Guarantee: a collector of the caller's that fails does not take the
// other metrics down with it: /metrics answers 200 with the Observer's
// series and the caller's that gathered, and logs the error on the
// Observer's logger, one line per scrape. A scrape that gathered nothing
// answers 500, logged once too.
func TestMetricsServesWhatGatheredWhenACollectorFails(t *testing.T) {
	logs := &logRecorder{}
	obs := observe.New(observe.Options{Logger: slog.New(logs)})
	add(t, obs, pushPipeline(t, "orders"))
	reg := newRegistry(t, obs)
	reg.MustRegister(failingCollector{prometheus.NewDesc("app_rows", "Rows in the table.", nil, nil)})
	requests := prometheus.NewCounter(prometheus.CounterOpts{Name: "app_requests_total", Help: "Requests served."})
	requests.Add(3)
	reg.MustRegister(requests)
	h := obs.Handler(reg)
	for scrape := 1; scrape <= 2; scrape++ {
		code, body := serveMetrics(t, h)
		if code != http.StatusOK {
			t.Fatalf("scrape %d: /metrics answered %d, want 200:\n%s", scrape, code, body)
		}
		expectSeriesOnce(t, body, `boulevard_pipeline_up{pipeline="orders"}`, 1)
		expectSeriesOnce(t, body, "app_requests_total", 3)
		promtoolCheck(t, body)
		if n := len(logs.lines("the database is unreachable")); n != scrape {
			t.Errorf("after scrape %d, %d log lines on the failing collector, want %d; logs:\n%s",
				scrape, n, scrape, strings.Join(logs.lines(), "\n"))
		}
	}

	alone := prometheus.NewPedanticRegistry()
	alone.MustRegister(failingCollector{prometheus.NewDesc("app_rows", "Rows in the table.", nil, nil)})
	if code, body := serveMetrics(t, obs.Handler(alone)); code != http.StatusInternalServerError {
		t.Errorf("/metrics with nothing gathered answered %d, want 500:\n%s", code, body)
	}
	if n := len(logs.lines("the database is unreachable")); n != 3 {
		t.Errorf("%d log lines on the failing collector after 3 scrapes, want 3; logs:\n%s", n, strings.Join(logs.lines(), "\n"))
	}
}
