package observe

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
)

// Report is the JSON body of /healthz and /readyz.
type Report struct {
	// Status is "ok", or "unhealthy" (/healthz) / "not ready" (/readyz).
	Status string `json:"status"`
	// Pipelines has one entry per pipeline added, in the order added.
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
//     registered on; nil means a registry of the Observer alone);
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
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
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
// stage gave up on its source (a *producer.RestartError).
func (o *Observer) Health() []PipelineReport {
	return o.check(healthy)
}

// Readiness checks that every pipeline runs and is connected: it has not
// stopped, no producer stage is restarting, failed or stopped, none is
// reconnecting after a failed run, and at least one of its stages has a
// connected source (a push-only pipeline, without producer stages, is
// ready while it runs). A member of a consumer group that has been given
// no partition stays "connecting" without failures: it does not make the
// pipeline unready while another stage is connected.
func (o *Observer) Readiness() []PipelineReport {
	return o.check(ready)
}

func (o *Observer) check(f func(pipeline.Stats) string) []PipelineReport {
	pipes, _, _ := o.snapshot()
	out := make([]PipelineReport, 0, len(pipes))
	for _, p := range pipes {
		st := p.p.Stats()
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

// slogPrinter logs promhttp's errors through the Observer's logger.
type slogPrinter struct{ o *Observer }

func (p slogPrinter) Println(v ...any) { p.o.log.Warn("serving metrics", "error", fmt.Sprint(v...)) }
