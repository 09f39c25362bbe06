package topology_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

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
