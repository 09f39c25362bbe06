package pipeline_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/validate"
)

// partitionKeys are shared strings, as a source would keep one per partition.
var partitionKeys = []string{"t/0", "t/1", "t/2", "t/3", "t/4", "t/5"}

// runOrdered runs a grid source whose messages carry partition keys through
// four processors that sleep at random, and returns the ids each key's
// messages were handled in.
func runOrdered(t *testing.T, ordered bool) (map[string][]uint64, pipeline.Topology) {
	t.Helper()
	const n = 1200
	rec := acker.NewRecorder(false)
	var mu sync.Mutex
	seen := map[string][]uint64{}
	src := &gridSource{feeds: 1, perFeed: n, ack: rec, ordered: ordered,
		partKeyOf: func(id uint64) string { return partitionKeys[int(id)%len(partitionKeys)] }}
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:     "ordered",
		Producer: producer.Options[uint64]{Source: src},
		Processors: processor.Options[uint64, uint64]{
			Concurrency: 4,
			MaxDemand:   1,
			Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				if rand.IntN(8) == 0 {
					time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				}
				mu.Lock()
				seen[m.PartitionKey()] = append(seen[m.PartitionKey()], m.Data)
				mu.Unlock()
				return m.Data, nil
			},
		},
	})
	if err := p.Run(ctxT(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	assertExactlyOnce(t, rec, n)
	return seen, p.Topology()
}

// Guarantee: a source that asks for ordering (producer.Info.Ordered) has each
// partition key handled in delivery order when the processors have no
// PartitionBy of their own.
func TestOrderedSourceKeepsPartitionKeyOrder(t *testing.T) {
	seen, topo := runOrdered(t, true)
	if !topo.Processors.Partitioned {
		t.Fatalf("topology does not show partitioned processors: %s", topo)
	}
	for k, ids := range seen {
		if !slices.IsSorted(ids) {
			t.Fatalf("partition key %s handled out of order: %v", k, ids[:min(len(ids), 20)])
		}
	}
	if len(seen) != len(partitionKeys) {
		t.Fatalf("saw %d partition keys, want %d", len(seen), len(partitionKeys))
	}
}

// Guarantee: a source that does not ask for ordering leaves the processors
// balanced (partition keys are only a hint).
func TestUnorderedSourceStaysBalanced(t *testing.T) {
	_, topo := runOrdered(t, false)
	if topo.Processors.Partitioned {
		t.Fatalf("processors partitioned for a source that did not ask: %s", topo)
	}
}

// validatingSource reports a broken option of its own.
type validatingSource struct{ producer.SourceFunc[uint64] }

func (validatingSource) Info() (producer.Info, error) {
	return producer.Info{}, validate.Errors{validate.Field("kafka.brokers", "required", "is required")}
}

// Guarantee: a source's own option errors are reported by pipeline.New,
// beside the pipeline's, before anything starts.
func TestSourceValidationReportedByNew(t *testing.T) {
	_, err := pipeline.New(pipeline.Options[uint64, uint64]{
		Name:       "v",
		Producer:   producer.Options[uint64]{Source: validatingSource{}, Concurrency: -1},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	if !errors.Is(err, validate.ErrInvalid) {
		t.Fatalf("New: %v, want a validation error", err)
	}
	var es validate.Errors
	if !errors.As(err, &es) || !es.Has("kafka.brokers", "required") || !es.Has("producer.concurrency", "") {
		t.Fatalf("New: %v, want both the source's and the pipeline's errors", err)
	}
	if !strings.Contains(err.Error(), "kafka.brokers is required") {
		t.Fatalf("error %q does not name the source's field", err)
	}
}

// panickingInfoSource panics in Info.
type panickingInfoSource struct{ producer.SourceFunc[uint64] }

func (panickingInfoSource) Info() (producer.Info, error) { panic("info broke") }

// Guarantee: a source whose Info panics is an invalid option: pipeline.New
// returns an error wrapping *message.PanicError, beside the pipeline's own
// option errors, and the process goes on.
func TestSourceInfoPanicReportedByNew(t *testing.T) {
	_, err := pipeline.New(pipeline.Options[uint64, uint64]{
		Name:       "v",
		Producer:   producer.Options[uint64]{Source: panickingInfoSource{}, Concurrency: -1},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	var pe *message.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("New with a source whose Info panics = %v, want an error wrapping *message.PanicError", err)
	}
	var es validate.Errors
	if !errors.As(err, &es) || !es.Has("producer.concurrency", "") {
		t.Fatalf("New: %v, want the pipeline's own option errors as well", err)
	}
	if !strings.Contains(err.Error(), "info broke") {
		t.Fatalf("error %q does not carry the panic's value", err)
	}
}

// Guarantee: a deferred message is not acknowledged by the pipeline; the code
// that deferred it reports its outcome later, exactly once.
func TestDeferredMessagesAreLeftToTheirOwner(t *testing.T) {
	for _, withBatcher := range []bool{false, true} {
		rec := acker.NewRecorder(false)
		var mu sync.Mutex
		var deferred []acker.Outcome
		o := pipeline.Options[uint64, uint64]{
			Name:     "defer",
			Producer: producer.Options[uint64]{Source: &gridSource{feeds: 2, perFeed: 300, ack: rec}},
			Processors: processor.Options[uint64, uint64]{
				Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
					if m.Data%2 == 0 {
						m.Defer()
						mu.Lock()
						deferred = append(deferred, m.Outcome())
						mu.Unlock()
					}
					return m.Data, nil
				},
			},
		}
		if withBatcher {
			o.Batchers = []batcher.Options[uint64]{{Name: message.DefaultBatcher, BatchSize: 10,
				Handle: func(context.Context, []*message.Message[uint64], message.BatchInfo) error { return nil }}}
		}
		p := mustNew(t, o)
		if err := p.Run(ctxT(t, 20*time.Second)); err != nil {
			t.Fatal(err)
		}
		if got := rec.Total(); got != 300 {
			t.Fatalf("batcher=%v: pipeline acknowledged %d messages, want the 300 odd ones", withBatcher, got)
		}
		for id := range rec.Counts() {
			if id%2 == 0 {
				t.Fatalf("batcher=%v: deferred message %x acknowledged by the pipeline", withBatcher, id)
			}
		}
		rec.Ack(context.Background(), deferred, nil)
		assertExactlyOnce(t, rec, 600)
	}
}

// Guarantee: each processor queue holds at least one permit window, so that
// a source's delivery usually goes straight to the processors; partitioned
// or not.
func TestProcessorQueueHoldsAWindow(t *testing.T) {
	handle := func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }
	for _, tc := range []struct {
		name string
		flow producer.Flow
		by   func(*message.Message[int]) string
		want int
	}{
		{"default window", producer.Flow{}, nil, producer.DefaultFlowInitial},
		{"large window", producer.Flow{Initial: 300}, nil, 300},
		{"large window, partitioned", producer.Flow{Initial: 300}, func(*message.Message[int]) string { return "" }, 300},
		{"small window", producer.Flow{Initial: 10}, nil, 64},
	} {
		p, err := pipeline.New(pipeline.Options[int, int]{
			Name:       "q",
			Producer:   producer.Options[int]{Flow: tc.flow},
			Processors: processor.Options[int, int]{Concurrency: 2, Handle: handle, PartitionBy: tc.by},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Topology().Processors.QueueCapacity; got != tc.want {
			t.Errorf("%s: queue capacity %d, want %d", tc.name, got, tc.want)
		}
	}
}
