package main

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/observe"
)

// With an Observer (what -http serves), every pipeline of the example is
// in its snapshot.
func TestObserverSeesEveryPipeline(t *testing.T) {
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
}
