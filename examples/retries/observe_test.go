package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/observe"
)

// With an Observer (what -http serves), every pipeline of the example is
// in its snapshot, and every topology source in its metrics, under its
// topology's name, with the retries and dead letters the report shows.
func TestObserverSeesEveryPipelineAndTopologySource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs := observe.New(observe.Options{})
	if err := run(ctx, io.Discard, slog.New(slog.DiscardHandler), obs); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range obs.Snapshot(ctx).Pipelines {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if want := []string{"ledger", "ledger-dlq", "orders"}; !slices.Equal(names, want) {
		t.Fatalf("observed pipelines %v, want %v", names, want)
	}

	rr := httptest.NewRecorder()
	obs.Handler(nil).ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`boulevard_topology_messages_acked_total{topology="order-settlement"} 7`,
		`boulevard_topology_messages_retried_total{topology="order-settlement"} 4`,
		`boulevard_topology_messages_dead_lettered_total{reason="rejected",topology="order-settlement"} 1`,
		`boulevard_topology_messages_dead_lettered_total{reason="poisoned",topology="ledger"} 3`,
		`boulevard_topology_messages_poisoned_total{topology="ledger"} 3`,
		`boulevard_topology_messages_acked_total{topology="ledger-dlq"} 3`,
	} {
		if !strings.Contains(rr.Body.String(), want+"\n") {
			t.Errorf("/metrics lacks %s:\n%s", want, rr.Body)
		}
	}
}
