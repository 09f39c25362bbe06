package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/validate"
)

// measureNew calls New and reports how many bytes it allocated and its
// error.
func measureNew(o pipeline.Options[uint64, uint64]) (uint64, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p, err := pipeline.New(o)
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(p)
	return after.TotalAlloc - before.TotalAlloc, err
}

// stageField is one bounded producer, processor or batcher option.
type stageField struct {
	field string
	set   func(o *pipeline.Options[uint64, uint64], v int64)
	max   int64
}

var stageFields = []stageField{
	{"processors.concurrency", func(o *pipeline.Options[uint64, uint64], v int64) { o.Processors.Concurrency = int(v) }, processor.ConcurrencyLimit},
	{"processors.maxDemand", func(o *pipeline.Options[uint64, uint64], v int64) { o.Processors.MaxDemand = int(v) }, processor.MaxDemandLimit},
	{"batchers[0].batchSize", func(o *pipeline.Options[uint64, uint64], v int64) { o.Batchers[0].BatchSize = int(v) }, batcher.BatchSizeLimit},
	{"batchers[0].concurrency", func(o *pipeline.Options[uint64, uint64], v int64) { o.Batchers[0].Concurrency = int(v) }, batcher.ConcurrencyLimit},
	{"processors.queueCapacity", func(o *pipeline.Options[uint64, uint64], v int64) { o.Processors.QueueCapacity = int(v) }, processor.QueueCapacityLimit},
	{"batchers[0].queueCapacity", func(o *pipeline.Options[uint64, uint64], v int64) { o.Batchers[0].QueueCapacity = int(v) }, batcher.QueueCapacityLimit},
	{"batchers[0].batchQueueCapacity", func(o *pipeline.Options[uint64, uint64], v int64) { o.Batchers[0].BatchQueueCapacity = int(v) }, batcher.BatchQueueCapacityLimit},
	{"batchers[0].batchTimeout", func(o *pipeline.Options[uint64, uint64], v int64) { o.Batchers[0].BatchTimeout = time.Duration(v) }, int64(batcher.BatchTimeoutLimit)},
}

// Guarantee: an extreme value of any bounded size, concurrency or
// duration option of the producer, processors or batchers (1e12, 1e9,
// MaxInt64, the bound plus one, negative, MinInt64) is an error naming
// the field and the rule, never a panic or a large allocation.
func TestStageOptionExtremes(t *testing.T) {
	for _, f := range slices.Concat(stageFields, producerFields) {
		for _, v := range []int64{1e12, 1e9, math.MaxInt64, f.max + 1, -1, math.MinInt64} {
			if v > 0 && v <= f.max {
				continue // within bounds (1e9 messages per interval, a 1e12ns failing time)
			}
			t.Run(fmt.Sprintf("%s=%d", f.field, v), func(t *testing.T) {
				o := validOptions()
				f.set(&o, v)
				allocated, err := measureNew(o)
				var errs validate.Errors
				if !errors.Is(err, validate.ErrInvalid) || !errors.As(err, &errs) || !errs.Has(f.field, "") {
					t.Fatalf("New = %v, want an error naming %s", err, f.field)
				}
				if v > f.max && !errs.Has(f.field, "lte") {
					t.Errorf("New = %v, want %s's upper bound named", err, f.field)
				}
				if allocated > 1<<20 {
					t.Errorf("New allocated %d bytes for an invalid option", allocated)
				}
			})
		}
	}
}

// Guarantee: processors' Concurrency × MaxDemand beyond ChunkSlotsLimit is
// an error naming processors.maxDemand and the product rule, even though
// each field is within its own bound.
func TestProcessorChunkSlotsBound(t *testing.T) {
	o := validOptions()
	o.Processors.Concurrency = processor.ConcurrencyLimit
	o.Processors.MaxDemand = processor.MaxDemandLimit
	allocated, err := measureNew(o)
	var errs validate.Errors
	if !errors.As(err, &errs) || !errs.Has("processors.maxDemand", "chunkSlots") || len(errs) != 1 {
		t.Fatalf("New = %v, want only the concurrency × maxDemand rule", err)
	}
	if allocated > 1<<20 {
		t.Errorf("New allocated %d bytes for an invalid option", allocated)
	}
}

// Guarantee: a pipeline built with every processor and batcher option at
// its documented bound is accepted and reserves a bounded amount of memory
// (well under 128 MiB) before it runs.
func TestLargestStageOptionsStayBounded(t *testing.T) {
	o := validOptions()
	o.Processors.Concurrency = processor.ConcurrencyLimit
	o.Processors.MaxDemand = processor.ChunkSlotsLimit / processor.ConcurrencyLimit
	o.Batchers[0].BatchSize = batcher.BatchSizeLimit
	o.Batchers[0].Concurrency = batcher.ConcurrencyLimit
	o.Batchers[0].PartitionBy = func(*message.Message[uint64]) string { return "" }
	allocated, err := measureNew(o)
	if err != nil {
		t.Fatal(err)
	}
	if allocated > 128<<20 {
		t.Fatalf("New allocated %d MiB at the documented bounds", allocated>>20)
	}
	t.Logf("New at the bounds allocated %d MiB", allocated>>20)
	// The queue capacities set at their bounds instead of derived.
	o.Processors.QueueCapacity = processor.QueueCapacityLimit
	o.Batchers[0].QueueCapacity = batcher.QueueCapacityLimit / batcher.ConcurrencyLimit
	o.Batchers[0].BatchQueueCapacity = batcher.BatchQueueCapacityLimit / batcher.ConcurrencyLimit
	allocated, err = measureNew(o)
	if err != nil {
		t.Fatal(err)
	}
	if allocated > 128<<20 {
		t.Fatalf("New allocated %d MiB at the documented bounds", allocated>>20)
	}
	t.Logf("New at the bounds allocated %d MiB", allocated>>20)
}

// Guarantee: starting a pipeline whose batcher has every option at its
// documented bound (Concurrency partitions with a MaxDemand each) reserves
// a bounded amount of memory: a partition's receive buffer is no larger
// than its queue.
func TestLargestBatcherOptionsStartWithinMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := validOptions()
		o.Processors.Concurrency = 1
		o.Batchers[0].Concurrency = batcher.ConcurrencyLimit
		o.Batchers[0].MaxDemand = batcher.MaxDemandLimit
		o.Batchers[0].PartitionBy = func(*message.Message[uint64]) string { return "" }
		p := mustNew(t, o)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // every partition and batch processor waits for input
		runtime.ReadMemStats(&after)
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 128<<20 {
			t.Fatalf("starting the pipeline allocated %d MiB with batcher options at their bounds", got>>20)
		}
	})
}

// Guarantee: the number of batchers is bounded: BatchersLimit batchers
// are accepted, one more is an error naming the batchers field and its
// max rule, reported before the batchers' queues are built.
func TestBatcherCountBound(t *testing.T) {
	withBatchers := func(n int) pipeline.Options[uint64, uint64] {
		o := validOptions()
		o.Batchers = nil
		for i := range n {
			name := fmt.Sprintf("b%d", i)
			if i == 0 {
				name = message.DefaultBatcher
			}
			o.Batchers = append(o.Batchers, batcher.Options[uint64]{Name: name, Handle: batchOK})
		}
		return o
	}
	if _, err := pipeline.New(withBatchers(pipeline.BatchersLimit)); err != nil {
		t.Fatalf("New with BatchersLimit batchers = %v, want it accepted", err)
	}
	allocated, err := measureNew(withBatchers(pipeline.BatchersLimit + 1))
	var errs validate.Errors
	if !errors.As(err, &errs) || !errs.Has("batchers", "max") || len(errs) != 1 {
		t.Fatalf("New with BatchersLimit+1 batchers = %v, want only batchers' max rule", err)
	}
	if want := fmt.Sprintf("batchers must have at most %d element(s)", pipeline.BatchersLimit); errs[0].Message != want {
		t.Errorf("error %q, want %q", errs[0].Message, want)
	}
	if allocated > 1<<20 {
		t.Errorf("New allocated %d bytes for an invalid option", allocated)
	}
}
