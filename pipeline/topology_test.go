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
