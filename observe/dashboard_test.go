package observe_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/observe"
)

// Guarantee: /stats answers a JSON snapshot of every pipeline added, with
// the counters Pipeline.Stats holds, and /dashboard serves the embedded
// page that reads it, without external resources.
func TestStatsAndDashboardEndpoints(t *testing.T) {
	p := pushPipeline(t, "dash")
	rec := acker.NewRecorder(false)
	push(t, p, rec, 0, 10)
	wait.For(t, "every message acknowledged", func() bool { return rec.Total() == 10 })
	obs := observe.New(observe.Options{})
	add(t, obs, p)
	h := obs.Handler(nil)

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/stats", nil))
	var snap observe.Snapshot
	if err := json.Unmarshal(w.Body.Bytes(), &snap); err != nil {
		t.Fatalf("/stats: %d %q: %v", w.Code, w.Body.String(), err)
	}
	if len(snap.Pipelines) != 1 || snap.Pipelines[0].Name != "dash" || snap.Pipelines[0].Processors.In != 10 ||
		len(snap.Pipelines[0].Batchers) != 1 || snap.Kafka == nil || snap.Topics == nil {
		t.Errorf("/stats snapshot: %+v", snap)
	}

	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/dashboard", nil))
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") ||
		!strings.Contains(body, `fetch("stats"`) {
		t.Fatalf("/dashboard: %d %s, body of %d bytes", w.Code, w.Header().Get("Content-Type"), len(body))
	}
	for _, external := range []string{"http://", "https://", "//cdn"} {
		if strings.Contains(body, external) {
			t.Errorf("/dashboard refers to an external resource (%q)", external)
		}
	}
}
