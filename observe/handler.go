package observe

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
)

// Report is the JSON body of /healthz and /readyz.
type Report struct {
	// Status is "ok", or "unhealthy" (/healthz) / "not ready" (/readyz).
	Status string `json:"status"`
	// Pipelines has one entry per pipeline added, in the order added; of
	// pipelines that report the same name at once, only the one whose
	// series /metrics reports (see Observer.Collect).
	Pipelines []PipelineReport `json:"pipelines"`
}

// PipelineReport is one pipeline's part of a Report.
type PipelineReport struct {
	Name string `json:"name"`
	// OK reports whether the pipeline passes the check; Reason says why
	// not ("" when it does).
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// Handler returns the HTTP handler of the Observer's endpoints, to mount on
// the caller's own server (it listens nowhere itself):
//
//   - /metrics: the metrics gathered from g in the Prometheus text or
//     OpenMetrics format (g is usually the registry the Observer is
//     registered on; nil means a registry of the Observer alone). When
//     one of g's collectors fails, the metrics the others gathered are
//     served all the same (200), and the error is logged, one line per
//     scrape; only a scrape that gathered nothing answers 500;
//   - /healthz: 200 while no pipeline was stopped by a fatal error (a
//     source that failed too often), 503 otherwise;
//   - /readyz: 200 when every pipeline runs and its sources are connected,
//     503 with the reasons otherwise;
//   - /stats: a JSON Snapshot of everything added;
//   - /dashboard: a live page drawing each pipeline's stages from /stats,
//     refreshed every second (embedded: no external resource).
//
// Both checks answer with a JSON Report. Any other path is 404.
func (o *Observer) Handler(g prometheus.Gatherer) http.Handler {
	if g == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(o)
		g = reg
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(partialGatherer{g: g, log: o.log}, promhttp.HandlerOpts{
		ErrorLog:          slogPrinter{o},
		EnableOpenMetrics: true,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		o.writeReport(w, o.Health(), "unhealthy")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		o.writeReport(w, o.Readiness(), "not ready")
	})
	mux.HandleFunc("GET /stats", o.serveStats)
	mux.HandleFunc("GET /dashboard", serveDashboard)
	return mux
}

// Health checks that no pipeline was stopped by a fatal error: a producer
// stage gave up on its source (a *producer.RestartError). Of pipelines
// that report the same name at once, it checks the one whose series
// /metrics reports (see Collect).
func (o *Observer) Health() []PipelineReport {
	return o.check(healthy)
}

// Readiness checks that every pipeline runs and is connected: it has not
// stopped, no producer stage is restarting, failed or stopped, none is
// reconnecting after a failed run, and at least one of its stages has a
// connected source (a push-only pipeline, without producer stages, is
// ready while it runs). A member of a consumer group that has been given
// no partition stays "connecting" without failures: it does not make the
// pipeline unready while another stage is connected. Of pipelines that
// report the same name at once, it checks the one whose series /metrics
// reports (see Collect).
func (o *Observer) Readiness() []PipelineReport {
	return o.check(ready)
}

// check reports f of each pipeline /metrics reports (selectPipelines).
func (o *Observer) check(f func(pipeline.Stats) string) []PipelineReport {
	pipes, _, _ := o.snapshot()
	sts, _ := selectPipelines(pipes, nil)
	out := make([]PipelineReport, 0, len(sts))
	for _, st := range sts {
		reason := f(st)
		out = append(out, PipelineReport{Name: st.Name, OK: reason == "", Reason: reason})
	}
	return out
}

func healthy(st pipeline.Stats) string {
	var re *producer.RestartError
	if errors.As(st.Err, &re) {
		return fmt.Sprintf("stopped by a fatal error: %v", st.Err)
	}
	for _, ps := range st.Producers {
		if ps.State == producer.StateFailed {
			return fmt.Sprintf("%s failed: %v", ps.Stage, ps.LastError)
		}
	}
	return ""
}

func ready(st pipeline.Stats) string {
	if st.Started.IsZero() {
		return "not started"
	}
	if st.Stopped {
		return "stopped"
	}
	connected := len(st.Producers) == 0
	for _, ps := range st.Producers {
		switch {
		case ps.State == producer.StateRunning:
			connected = true
		case ps.State == producer.StateConnecting && ps.ConsecutiveFailures == 0:
		case ps.LastError != nil:
			return fmt.Sprintf("%s %s after %d failed runs in a row: %v", ps.Stage, ps.State, ps.ConsecutiveFailures, ps.LastError)
		default:
			return fmt.Sprintf("%s %s", ps.Stage, ps.State)
		}
	}
	if !connected {
		return "no source connected yet"
	}
	return ""
}

func (o *Observer) writeReport(w http.ResponseWriter, reports []PipelineReport, bad string) {
	rep := Report{Status: "ok", Pipelines: reports}
	code := http.StatusOK
	for _, r := range reports {
		if !r.OK {
			rep.Status, code = bad, http.StatusServiceUnavailable
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(rep); err != nil {
		o.log.Debug("writing a health report failed", "error", err)
	}
}

// partialGatherer gathers from g. When a collector fails while others
// gathered, it logs the error and returns what gathered without an error,
// so that /metrics serves it: a failing collector of the caller's does
// not hide the pipelines' metrics (Prometheus would take the whole target
// down on a 500). Errors writing the response still end it, logged once
// by promhttp.
type partialGatherer struct {
	g   prometheus.Gatherer
	log *slog.Logger
}

// Gather implements prometheus.Gatherer.
func (p partialGatherer) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := p.g.Gather()
	if err != nil && len(mfs) > 0 {
		p.log.Warn("serving the metrics gathered without those of a failing collector", "error", err)
		return mfs, nil
	}
	return mfs, err
}

// slogPrinter logs promhttp's errors through the Observer's logger.
type slogPrinter struct{ o *Observer }

func (p slogPrinter) Println(v ...any) { p.o.log.Warn("serving metrics", "error", fmt.Sprint(v...)) }
