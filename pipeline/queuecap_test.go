package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/validate"
)

// bulkSource delivers total messages (0: until stopped) on one feed,
// everything its feed grants in one Deliver call, and counts what it
// delivered.
func bulkSource(total int, rec *acker.Recorder, delivered *atomic.Int64) *countingSource {
	return &countingSource{run: func(ctx context.Context, st *producer.Stage[uint64], _ int) error {
		feed := st.NewFeed("bulk", nil)
		for next := 0; total == 0 || next < total; {
			want := 1 << 20
			if total > 0 {
				want = total - next
			}
			n, err := feed.Acquire(ctx, want)
			if err != nil {
				return nil
			}
			msgs := make([]*message.Message[uint64], n)
			for i := range msgs {
				msgs[i] = message.New(uint64(next), rec, uint64(next))
				next++
			}
			delivered.Add(int64(n))
			feed.Deliver(msgs...)
		}
		return nil
	}}
}

// heldBound is the most messages the pipeline can hold, delivered and
// without an outcome, as docs/operations.md ("Sizing memory for large
// records") counts them for one feed, one batch key and no PartitionBy.
func heldBound(o pipeline.Options[uint64, uint64], topo pipeline.Topology) int {
	n := o.Producer.Flow.WithDefaults().MaxWindow() +
		topo.Processors.QueueCapacity + topo.Processors.Concurrency*topo.Processors.MaxDemand
	for _, b := range topo.Batchers {
		// A batch processor alone on its queue takes up to 64 messages'
		// worth of batches at once.
		taken := 1
		if b.Concurrency == 1 || b.Partitioned {
			taken = max(1, min(16, 64/b.BatchSize, b.BatchQueueCapacity))
		}
		n += b.QueueCapacity + b.MaxDemand + b.BatchSize - 1 +
			b.BatchQueueCapacity*b.BatchSize + b.Concurrency*taken*b.BatchSize
	}
	return n
}

// Guarantee: under back-pressure (a handler, or a batch handler, that
// blocks) the messages a source delivered and whose outcome has not come
// stay within the bound the options give; the queue capacity options
// lower that bound, so that set small the pipeline holds fewer messages
// than with the derived capacities. Every message held is then
// acknowledged once the handler lets go.
func TestQueueCapacitiesBoundHeldMessages(t *testing.T) {
	small := func(o *pipeline.Options[uint64, uint64]) {
		o.Processors.QueueCapacity = 1
		for i := range o.Batchers {
			o.Batchers[i].QueueCapacity = 1
			o.Batchers[i].BatchQueueCapacity = 1
		}
	}
	for _, withBatcher := range []bool{false, true} {
		var smallHeld int
		for _, set := range []bool{true, false} {
			t.Run(fmt.Sprintf("batcher=%v/set=%v", withBatcher, set), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					rec := acker.NewRecorder(false)
					var delivered atomic.Int64
					release := make(chan struct{})
					block := func() { <-release }
					o := pipeline.Options[uint64, uint64]{
						Name:     "held",
						Producer: producer.Options[uint64]{Source: bulkSource(0, rec, &delivered), Flow: producer.Flow{Initial: 2}},
						Processors: processor.Options[uint64, uint64]{Concurrency: 1, MaxDemand: 1,
							Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
								if !withBatcher {
									block()
								}
								return m.Data, nil
							}},
					}
					if withBatcher {
						o.Batchers = []batcher.Options[uint64]{{Name: "default", BatchSize: 4, MaxDemand: 1, Concurrency: 1,
							BatchTimeout: time.Hour,
							Handle: func(context.Context, []*message.Message[uint64], message.BatchInfo) error {
								block()
								return nil
							}}}
					}
					if set {
						small(&o)
					}
					p := mustNew(t, o)
					if err := p.Start(context.Background()); err != nil {
						t.Fatal(err)
					}
					synctest.Wait() // every queue is full, every stage waits
					held := int(delivered.Load()) - rec.Total()
					bound := heldBound(o, p.Topology())
					t.Logf("held %d messages, bound %d", held, bound)
					if held > bound {
						t.Errorf("held %d messages, more than the bound of %d", held, bound)
					}
					if set {
						smallHeld = held
					} else if held <= smallHeld {
						t.Errorf("held %d messages with the derived capacities, no more than the %d with small ones", held, smallHeld)
					}
					close(release)
					if err := p.Stop(context.Background()); err != nil {
						t.Fatal(err)
					}
					if d := int(delivered.Load()); rec.Total() != d {
						t.Fatalf("%d outcomes for %d messages delivered", rec.Total(), d)
					}
				})
			})
		}
	}
}

// Guarantee: queues smaller than what the producer hands over at once
// (its chunk, a delivery of a whole window) and than the processors' and
// batchers' MaxDemand and BatchSize move every message through: nothing
// waits for room that never comes, and every message is acknowledged
// once. With PartitionBy too, each processor and batcher partition with a
// queue of one.
func TestQueueSmallerThanChunkMovesEveryMessage(t *testing.T) {
	for _, partitioned := range []bool{false, true} {
		t.Run(fmt.Sprintf("partitioned=%v", partitioned), func(t *testing.T) {
			const total = 3000
			rec := acker.NewRecorder(false)
			var delivered atomic.Int64
			o := pipeline.Options[uint64, uint64]{
				Name:     "tiny-queues",
				Producer: producer.Options[uint64]{Source: bulkSource(total, rec, &delivered), Flow: producer.Flow{Initial: 500}},
				Processors: processor.Options[uint64, uint64]{Concurrency: 3, MaxDemand: 50, QueueCapacity: 1,
					Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
						m.SetBatchKey(fmt.Sprint(m.Data % 3))
						return m.Data, nil
					}},
				Batchers: []batcher.Options[uint64]{{Name: "default", BatchSize: 20, MaxDemand: 64, Concurrency: 2,
					QueueCapacity: 1, BatchQueueCapacity: 1, BatchTimeout: time.Millisecond, Handle: batchOK}},
			}
			if partitioned {
				o.PartitionBy = func(m message.Keyed) string { return fmt.Sprint(m.(*message.Message[uint64]).Data % 7) }
			}
			p := mustNew(t, o)
			topo := p.Topology()
			if topo.Processors.QueueCapacity != 1 || topo.Batchers[0].QueueCapacity != 1 || topo.Batchers[0].BatchQueueCapacity != 1 {
				t.Fatalf("topology %+v, want every queue capacity 1", topo)
			}
			if err := p.Run(ctxT(t, 60*time.Second)); err != nil {
				t.Fatalf("Run: %v", err)
			}
			assertExactlyOnce(t, rec, total)
		})
	}
}

// Guarantee: a queue capacity out of its bounds, or whose partitioned
// queues together pass the bound, is an error naming the field and the
// rule; Topology and Stats report the capacities set.
func TestQueueCapacityOptionsValidated(t *testing.T) {
	key := func(*message.Message[uint64]) string { return "" }
	cases := []struct {
		set   func(o *pipeline.Options[uint64, uint64])
		field string
		rule  string
	}{
		{func(o *pipeline.Options[uint64, uint64]) { o.Processors.QueueCapacity = -1 }, "processors.queueCapacity", "gte"},
		{func(o *pipeline.Options[uint64, uint64]) {
			o.Batchers[0].QueueCapacity = batcher.QueueCapacityLimit + 1
		}, "batchers[0].queueCapacity", "lte"},
		{func(o *pipeline.Options[uint64, uint64]) {
			o.Batchers[0].BatchQueueCapacity = batcher.BatchQueueCapacityLimit + 1
		}, "batchers[0].batchQueueCapacity", "lte"},
		{func(o *pipeline.Options[uint64, uint64]) {
			o.Processors.PartitionBy, o.Processors.Concurrency, o.Processors.QueueCapacity = key, 2, processor.QueueCapacityLimit/2+1
		}, "processors.queueCapacity", "queueSlots"},
		{func(o *pipeline.Options[uint64, uint64]) {
			o.Batchers[0].PartitionBy, o.Batchers[0].Concurrency, o.Batchers[0].QueueCapacity = key, 4, batcher.QueueCapacityLimit/4+1
		}, "batchers[0].queueCapacity", "queueSlots"},
		{func(o *pipeline.Options[uint64, uint64]) {
			o.Batchers[0].PartitionBy, o.Batchers[0].Concurrency, o.Batchers[0].BatchQueueCapacity = key, 4, batcher.BatchQueueCapacityLimit/4+1
		}, "batchers[0].batchQueueCapacity", "batchSlots"},
	}
	for _, c := range cases {
		t.Run(c.field+"/"+c.rule, func(t *testing.T) {
			_, err := pipeline.New(boundsOptions(c.set))
			var errs validate.Errors
			if !errors.As(err, &errs) || len(errs) != 1 || !errs.Has(c.field, c.rule) {
				t.Fatalf("New = %v, want one %s error on %s", err, c.rule, c.field)
			}
		})
	}

	// Under an ordered source the pipeline partitions the processors by
	// itself: the error says so, not only "partitionBy", which the
	// application did not set.
	_, err := pipeline.New(boundsOptions(func(o *pipeline.Options[uint64, uint64]) {
		o.Producer.Source = idleOrderedSource{}
		o.Processors.Concurrency, o.Processors.QueueCapacity = 2, processor.QueueCapacityLimit/2+1
	}))
	var errs validate.Errors
	if !errors.As(err, &errs) || !errs.Has("processors.queueCapacity", "queueSlots") || !strings.Contains(err.Error(), "an ordered source's partition keys") {
		t.Errorf("New under an ordered source = %v, want a queueSlots error on processors.queueCapacity that names the ordered source's partition keys", err)
	}

	p := mustNew(t, boundsOptions(func(o *pipeline.Options[uint64, uint64]) {
		o.Processors.PartitionBy, o.Processors.Concurrency, o.Processors.QueueCapacity = key, 2, processor.QueueCapacityLimit/2
		o.Batchers[0].PartitionBy, o.Batchers[0].Concurrency = key, 4
		o.Batchers[0].QueueCapacity, o.Batchers[0].BatchQueueCapacity = 3, batcher.BatchQueueCapacityLimit/4
	}))
	topo, st := p.Topology(), p.Stats()
	if topo.Processors.QueueCapacity != processor.QueueCapacityLimit/2 || st.Processors.QueueCapacity != processor.QueueCapacityLimit {
		t.Errorf("processors: topology %d, stats %d; want each queue %d, %d together",
			topo.Processors.QueueCapacity, st.Processors.QueueCapacity, processor.QueueCapacityLimit/2, processor.QueueCapacityLimit)
	}
	b, bs := topo.Batchers[0], st.Batchers[0]
	if b.QueueCapacity != 3 || b.BatchQueueCapacity != batcher.BatchQueueCapacityLimit/4 ||
		bs.QueueCapacity != 12 || bs.BatchQueueCapacity != batcher.BatchQueueCapacityLimit {
		t.Errorf("batcher: topology %d and %d, stats %d and %d; want 3 and %d each, 12 and %d together",
			b.QueueCapacity, b.BatchQueueCapacity, bs.QueueCapacity, bs.BatchQueueCapacity,
			batcher.BatchQueueCapacityLimit/4, batcher.BatchQueueCapacityLimit)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
