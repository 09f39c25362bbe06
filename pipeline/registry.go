package pipeline

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/boulevard-go/boulevard/producer"
)

// Handle is what the registry of running pipelines offers of one pipeline,
// whatever its payload types; *Pipeline[In, Out] implements it.
type Handle interface {
	// Topology describes the pipeline's stages (see Pipeline.Topology).
	Topology() Topology
	// Stats is a snapshot of the stages' counters (see Pipeline.Stats).
	Stats() Stats
	// SourceStatus is the state of every producer stage.
	SourceStatus() []producer.StageStatus
	// RateLimit is the rate limit in force, or nil.
	RateLimit() *producer.RateLimit
	// Stop drains and stops the pipeline (see Pipeline.Stop).
	Stop(ctx context.Context) error
	// Done is closed once the pipeline has stopped.
	Done() <-chan struct{}
	// Err is what stopped the pipeline abnormally, or nil.
	Err() error
}

// RunningPipeline is one entry of Running.
type RunningPipeline struct {
	// Name is the pipeline's name (Options.Name). Names need not be unique
	// in a process.
	Name string
	// Pipeline is the pipeline itself.
	Pipeline Handle
}

// registry holds the pipelines started and not yet stopped, in start order.
var registry struct {
	mu      sync.Mutex
	seq     uint64
	entries map[Handle]registered
}

type registered struct {
	seq  uint64
	name string
}

// Running returns the pipelines of this process that have started and have
// not stopped yet (Broadway's all_running), in the order they started: a
// pipeline joins when Start succeeds and leaves just before its Done is
// closed. It is safe to call from any goroutine; the slice is the
// caller's.
func Running() []RunningPipeline {
	registry.mu.Lock()
	type entry struct {
		registered
		h Handle
	}
	all := make([]entry, 0, len(registry.entries))
	for h, r := range registry.entries {
		all = append(all, entry{r, h})
	}
	registry.mu.Unlock()
	slices.SortFunc(all, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]RunningPipeline, len(all))
	for i, e := range all {
		out[i] = RunningPipeline{Name: e.name, Pipeline: e.h}
	}
	return out
}

// register adds a started pipeline to the registry.
func register(name string, h Handle) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.entries == nil {
		registry.entries = make(map[Handle]registered)
	}
	registry.seq++
	registry.entries[h] = registered{seq: registry.seq, name: name}
}

// unregister removes a stopping pipeline from the registry.
func unregister(h Handle) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	delete(registry.entries, h)
}
