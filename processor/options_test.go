package processor_test

import (
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/validate"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Guarantee: Concurrency × MaxDemand beyond ChunkSlotsLimit is an error
// naming the field and the rule; within it, or with a field out of its own
// bounds (which its tag reports), CheckBounds says nothing.
func TestCheckBounds(t *testing.T) {
	ok := processor.Options[int, int]{Concurrency: processor.ConcurrencyLimit, MaxDemand: processor.ChunkSlotsLimit / processor.ConcurrencyLimit}
	if err := ok.CheckBounds("processors"); err != nil {
		t.Fatalf("%+v: %v", ok, err)
	}
	over := ok
	over.MaxDemand++
	err := over.CheckBounds("processors")
	var fe *validate.FieldError
	if !errors.As(err, &fe) || fe.Field != "processors.maxDemand" || !errors.Is(err, validate.ErrInvalid) {
		t.Fatalf("%+v: %v, want a FieldError on processors.maxDemand", over, err)
	}
	for _, o := range []processor.Options[int, int]{
		{Concurrency: 0, MaxDemand: 1 << 30},
		{Concurrency: processor.ConcurrencyLimit + 1, MaxDemand: processor.MaxDemandLimit},
	} {
		if err := o.CheckBounds("processors"); err != nil {
			t.Fatalf("%+v: %v, want nil (the tags report it)", o, err)
		}
	}
}
