package observe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/boulevard-go/boulevard/message"
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
	// Name is the pipeline's name.
	Name string `json:"name"`
	// OK reports whether the pipeline passes the check; Reason says why
	// not ("" when it does).
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// Handler returns the HTTP handler of the Observer's endpoints, to mount on
// the caller's own server (it listens nowhere itself; Serve serves it on
// an address of its own):
//
//   - /metrics: the metrics gathered from g in the Prometheus text or
//     OpenMetrics format (g is usually the registry the Observer is
//     registered on; nil means a registry of the Observer alone). When
//     one of g's collectors fails, the metrics the others gathered are
//     served all the same (200), and the error is logged, one line per
//     scrape; only a scrape that gathered nothing answers 500. A Stats of
//     something added that panics or has not returned within
//     Options.StatsTimeout is such a failure (see Collect). When g's
//     Gather has not returned within twice StatsTimeout (a collector of
//     the caller's that blocks), the answer is 500, logged once; until
//     that Gather returns, each scrape answers 500 at once, logged once
//     too, without gathering again, so that a collector that never
//     returns holds one goroutine however often /metrics is scraped. A
//     Gather of g that panics or ends its goroutine (runtime.Goexit)
//     gathered nothing: the answer is 500, with an error saying so (for
//     a panic, one wrapping its *message.PanicError);
//   - /healthz: 200 while no pipeline was stopped by a fatal error (a
//     source that failed too often), 503 otherwise;
//   - /readyz: 200 when every pipeline runs and its sources are connected,
//     503 with the reasons otherwise;
//   - /stats: a JSON Snapshot of everything added (500 with the error,
//     logged, when it cannot be encoded as JSON);
//   - /dashboard: a live page drawing each pipeline's stages from /stats,
//     refreshed every second (embedded: no external resource).
//
// Both checks answer with a JSON Report. Any other path is 404. The
// checks and /stats wait for the Stats of what was added for
// Options.StatsTimeout at most: a pipeline whose Stats panics or has not
// returned by then fails both checks, its error (wrapping ErrStats) the
// reason; /stats lists what could not be read in Snapshot.Failed. A
// Stats that panics never panics the handler or the registry's Gather.
func (o *Observer) Handler(g prometheus.Gatherer) http.Handler {
	if g == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(o)
		g = reg
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(&partialGatherer{g: g, log: o.log, timeout: 2 * o.timeout}, promhttp.HandlerOpts{
		ErrorLog:          slogPrinter{o},
		EnableOpenMetrics: true,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		o.writeReport(w, o.check(r.Context(), healthy), "unhealthy")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		o.writeReport(w, o.check(r.Context(), ready), "not ready")
	})
	mux.HandleFunc("GET /stats", o.serveStats)
	mux.HandleFunc("GET /dashboard", serveDashboard)
	return mux
}

// Health checks that no pipeline was stopped by a fatal error: a producer
// stage gave up on its source (a *producer.RestartError). Of pipelines
// that report the same name at once, it checks the one whose series
// /metrics reports (see Collect). A pipeline whose Stats panics or has not
// returned within Options.StatsTimeout fails it, its error (wrapping
// ErrStats) the reason. It waits for the stats until ctx ends or
// Options.StatsTimeout has passed, whichever comes first; a pipeline
// whose Stats has not returned by then fails it the same way. Health
// panics on a nil ctx.
func (o *Observer) Health(ctx context.Context) []PipelineReport {
	return o.check(ctx, healthy)
}

// Readiness checks that every pipeline runs and is connected: it has not
// stopped, no producer stage is restarting, degraded, failed or stopped, none is
// reconnecting after a failed run, and at least one of its stages has a
// connected source (a push-only pipeline, without producer stages, is
// ready while it runs). A member of a consumer group that has been given
// no partition stays "connecting" without failures: it does not make the
// pipeline unready while another stage is connected. Of pipelines that
// report the same name at once, it checks the one whose series /metrics
// reports (see Collect). A pipeline whose Stats panics or has not returned
// within Options.StatsTimeout, or before ctx ends, fails it, as in
// Health. Readiness panics on a nil ctx.
func (o *Observer) Readiness(ctx context.Context) []PipelineReport {
	return o.check(ctx, ready)
}

// check reports f of each pipeline /metrics reports (selectPipelines). A
// pipeline whose Stats could not be read fails the check, its error the
// reason, under the name it was added under.
func (o *Observer) check(ctx context.Context, f func(pipeline.Stats) string) []PipelineReport {
	sel, _ := selectPipelines(o.read(ctx).pipes, nil)
	out := make([]PipelineReport, 0, len(sel))
	for _, p := range sel {
		if p.err != nil {
			out = append(out, PipelineReport{Name: p.name, Reason: p.err.Error()})
			continue
		}
		reason := f(p.st)
		out = append(out, PipelineReport{Name: p.st.Name, OK: reason == "", Reason: reason})
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
		case ps.State == producer.StateDegraded:
			return fmt.Sprintf("%s degraded: %v", ps.Stage, ps.LastError)
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
// by promhttp. A Gather of g that has not returned within timeout is
// given up (an error wrapping ErrGatherTimeout): its goroutine ends when
// the collector that blocks it returns, which nothing can hasten, and
// until then g is not gathered again (see late), so that a collector
// that never returns holds one goroutine, not one per scrape.
type partialGatherer struct {
	g       prometheus.Gatherer
	log     *slog.Logger
	timeout time.Duration

	mu sync.Mutex
	// late is the latest gathering given up on while it has not
	// returned, nil when there is none.
	late *gathering
}

// ErrGatherTimeout is wrapped by the error /metrics answers 500 with, and
// logs, when the Gather of the handler's prometheus.Gatherer has not
// returned within twice Options.StatsTimeout, and by the error of every
// scrape that comes while that Gather has not returned: those answer
// 500 at once, without gathering again (see Observer.Handler).
var ErrGatherTimeout = errors.New("observe: gathering the metrics timed out")

// gathering is one Gather of a partialGatherer's g, on a goroutine of its
// own: mfs and err are set before done is closed. A Gather that panics or
// ends that goroutine (runtime.Goexit) gathered nothing, with an error
// saying so.
type gathering struct {
	since time.Time
	done  chan struct{}
	mfs   []*dto.MetricFamily
	err   error
}

// Gather implements prometheus.Gatherer.
func (p *partialGatherer) Gather() ([]*dto.MetricFamily, error) {
	p.mu.Lock()
	if late := p.late; late != nil {
		select {
		case <-late.done:
			p.late = nil
		default:
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: the gathering given up on has not returned since %s; not gathering again until it does",
				ErrGatherTimeout, late.since.UTC().Format(time.RFC3339))
		}
	}
	p.mu.Unlock()
	c := &gathering{since: time.Now(), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		returned := false
		var perr error
		defer func() {
			if pe, ok := perr.(*message.PanicError); ok {
				c.mfs, c.err = nil, panicked(fmt.Errorf("observe: the gatherer's Gather panicked: %v", pe.Value), pe)
			} else if !returned {
				c.mfs, c.err = nil, errors.New("observe: the gatherer's Gather ended its goroutine (runtime.Goexit)")
			}
		}()
		defer message.Recover(&perr)
		c.mfs, c.err = p.g.Gather()
		returned = true
	}()
	timer := time.NewTimer(p.timeout)
	defer timer.Stop()
	select {
	case <-c.done:
	case <-timer.C:
		p.mu.Lock()
		if p.late == nil {
			p.late = c
		}
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: the gatherer has not returned within %v", ErrGatherTimeout, p.timeout)
	}
	if c.err != nil && len(c.mfs) > 0 {
		p.log.Warn("serving the metrics gathered without those of a failing collector", "error", c.err)
		return c.mfs, nil
	}
	return c.mfs, c.err
}

// slogPrinter logs promhttp's errors through the Observer's logger.
type slogPrinter struct{ o *Observer }

func (p slogPrinter) Println(v ...any) { p.o.log.Warn("serving metrics", "error", fmt.Sprint(v...)) }
