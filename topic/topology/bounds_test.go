package topology_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: each upper bound of SourceOptions is itself accepted by
// NewSource, and the value one past it is refused with an error naming the
// field and its lte rule, with the bound's number.
func TestSourceOptionsAreAcceptedAtTheirUpperBoundsAndRefusedPastThem(t *testing.T) {
	_, q := declareMemory(t, build(t, topology.New("bounded").DLQ()))
	for _, c := range []struct {
		field string
		limit int
		set   func(*topology.SourceOptions[int], int)
	}{
		{"topology.maxRetries", topology.MaxRetriesLimit, func(o *topology.SourceOptions[int], n int) { o.MaxRetries = n }},
		{"topology.maxBatch", topology.MaxBatchLimit, func(o *topology.SourceOptions[int], n int) { o.MaxBatch = n }},
	} {
		t.Run(c.field, func(t *testing.T) {
			at := topology.SourceOptions[int]{Queues: q}
			c.set(&at, c.limit)
			if _, err := topology.NewSource(at); err != nil {
				t.Errorf("%s at its bound %d refused: %v", c.field, c.limit, err)
			}
			past := topology.SourceOptions[int]{Queues: q}
			c.set(&past, c.limit+1)
			_, err := topology.NewSource(past)
			var es validate.Errors
			if !errors.As(err, &es) || len(es) != 1 || !es.Has(c.field, "lte") {
				t.Fatalf("%s %d: NewSource = %v, want one lte error on %s", c.field, c.limit+1, err, c.field)
			}
			if want := fmt.Sprintf("%s must be ≤ %d", c.field, c.limit); !strings.Contains(err.Error(), want) {
				t.Errorf("%s %d: error %q does not say %q", c.field, c.limit+1, err, want)
			}
		})
	}
}

// Guarantee: MemoryOptions.Capacity at MaxMemoryCapacity is accepted by
// NewMemory (the value one past it is refused, see TestOptionsValidation).
func TestMemoryCapacityIsAcceptedAtItsBound(t *testing.T) {
	m, err := topology.NewMemory[int](topology.MemoryOptions{Capacity: topology.MaxMemoryCapacity})
	if err != nil {
		t.Fatalf("NewMemory with Capacity %d = %v", topology.MaxMemoryCapacity, err)
	}
	if err := m.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Guarantee: an in-memory backend at MaxMemoryCapacity reserves memory for
// the letters its queues hold, not for their capacity: declaring two
// groups with a hold queue and a DLQ each, and passing letters through
// them, takes a few MiB at most (a queue's slots for its full capacity
// would take 136 MiB each for []byte letters).
func TestMemoryAtItsLargestCapacityReservesOnlyWhatItHolds(t *testing.T) {
	before := heapInUse()
	m, err := topology.NewMemory[[]byte](topology.MemoryOptions{Capacity: topology.MaxMemoryCapacity, HoldCapacity: topology.MaxMemoryHoldCapacity})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close(context.Background()) }()
	for _, group := range []string{"billing", "shipping"} {
		q, err := m.Declare(t.Context(), build(t, topology.New("orders").ForConsumerGroup(group).Hold(time.Hour).DLQ()))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := q.Publish(t.Context(), topology.Letter[[]byte]{Value: []byte{byte(i)}}); err != nil {
				t.Fatal(err)
			}
		}
		r, err := q.Subscribe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]topology.Letter[[]byte], 3)
		n, err := r.Receive(t.Context(), dst)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Hold(t.Context(), 0, dst[0]); err != nil {
			t.Fatal(err)
		}
		if n > 1 {
			if err := q.DeadLetter(t.Context(), dst[1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if grown := int64(heapInUse()) - int64(before); grown > 8<<20 {
		t.Fatalf("an in-memory backend at Capacity %d holding a few letters in 2 groups takes %d MiB, want at most 8 MiB",
			topology.MaxMemoryCapacity, grown>>20)
	}
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
