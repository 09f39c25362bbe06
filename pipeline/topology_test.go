package pipeline_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: Topology reports the demand, weight and queue settings as
// configured, defaults applied (processors' MaxDemand, MinDemand and
// queue capacity, each batcher's MaxWeight, MaxDemand and queue
// capacities), and String and LogValue show them.
func TestTopologyShowsDemandAndWeight(t *testing.T) {
	o := validOptions()
	o.Processors.MaxDemand, o.Processors.MinDemand = 12, 4
	o.Processors.QueueCapacity = 7
	o.Batchers = append(o.Batchers, batcher.Options[uint64]{Name: "sized", BatchSize: 50, MaxDemand: 16,
		Weight: func(*message.Message[uint64]) int { return 1 }, MaxWeight: 4096, Handle: batchOK,
		QueueCapacity: 9, BatchQueueCapacity: 2})
	top := mustNew(t, o).Topology()
	if top.Processors.MaxDemand != 12 || top.Processors.MinDemand != 4 {
		t.Fatalf("processors %+v, want max demand 12, min demand 4", top.Processors)
	}
	def, sized := top.Batchers[0], top.Batchers[1]
	if def.MaxDemand != batcher.DefaultMaxDemand || def.MaxWeight != 0 {
		t.Fatalf("default batcher %+v, want max demand %d and no weight rule", def, batcher.DefaultMaxDemand)
	}
	if sized.MaxDemand != 16 || sized.MaxWeight != 4096 {
		t.Fatalf("sized batcher %+v, want max demand 16, max weight 4096", sized)
	}
	s := top.String()
	for _, want := range []string{"max demand 12, min demand 4, queue 7", "batcher default: size 100, timeout 1s, max demand 64,",
		"batcher sized: size 50, max weight 4096, timeout 1s, max demand 16, 1 batch processor(s), queue 9, batch queue 2"} {
		if !strings.Contains(s, want) {
			t.Errorf("Topology.String() = %q, missing %q", s, want)
		}
	}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("t", slog.Any("topology", top))
	for _, want := range []string{"topology.max_demand=12", "topology.min_demand=4", "topology.queue_capacity=7", "topology.batcher_default.max_demand=64",
		"topology.batcher_sized.max_weight=4096", "topology.batcher_sized.max_demand=16",
		"topology.batcher_sized.queue_capacity=9", "topology.batcher_sized.batch_queue_capacity=2"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("logged %q, missing %q", logged.String(), want)
		}
	}
	if strings.Contains(logged.String(), "batcher_default.max_weight") {
		t.Errorf("logged %q: a batcher without a weight rule shows a max weight", logged.String())
	}
}

// Guarantee: a batcher's queues left at 0 take the capacities its field
// comments and docs/architecture.md give: an input queue of
// max(2·BatchSize, 64) messages (each partition's, with PartitionBy), and
// a batch queue of max(2·Concurrency, ⌈64/BatchSize⌉) batches, or with
// PartitionBy max(2, ⌈64/BatchSize⌉) each.
func TestBatcherQueuesDefaultToTheDocumentedCapacities(t *testing.T) {
	key := func(*message.Message[uint64]) string { return "" }
	for _, c := range []struct {
		name                   string
		batchSize, concurrency int
		by                     func(*message.Message[uint64]) string
		queue, batchQueue      int
	}{
		{"defaults", 0, 0, nil, 200, 2},
		{"small batches", 5, 1, nil, 64, 13},
		{"several batch processors", 10, 4, nil, 64, 8},
		{"large batches, several batch processors", 1000, 3, nil, 2000, 6},
		{"partitioned, small batches", 5, 4, key, 64, 13},
		{"partitioned, large batches", 1000, 4, key, 2000, 2},
	} {
		top := pushOnly(t, batcher.Options[uint64]{Name: "default", BatchSize: c.batchSize, Concurrency: c.concurrency,
			PartitionBy: c.by, Handle: batchOK}).Topology()
		if b := top.Batchers[0]; b.QueueCapacity != c.queue || b.BatchQueueCapacity != c.batchQueue {
			t.Errorf("%s: queue %d, batch queue %d; want %d and %d", c.name, b.QueueCapacity, b.BatchQueueCapacity, c.queue, c.batchQueue)
		}
	}
}
