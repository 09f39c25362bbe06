package processor_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/validate"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Guarantee: Concurrency × MaxDemand beyond ChunkSlotsLimit is an error
// naming the field and the rule; within it, Validate says nothing, and with
// a field out of its own bounds only its tag's rule is reported, not the
// product's.
func TestValidateChunkSlots(t *testing.T) {
	handle := func(context.Context, *message.Message[int]) (int, error) { return 0, nil }
	ok := processor.Options[int, int]{Concurrency: processor.ConcurrencyLimit, MaxDemand: processor.ChunkSlotsLimit / processor.ConcurrencyLimit, Handle: handle}
	if err := ok.ValidateAs("processors"); err != nil {
		t.Fatalf("%+v: %v", ok, err)
	}
	over := ok
	over.MaxDemand++
	err := over.ValidateAs("processors")
	var fe validate.Errors
	if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != "processors.maxDemand" || fe[0].Rule != "chunkSlots" || !errors.Is(err, validate.ErrInvalid) {
		t.Fatalf("%+v: %v, want a FieldError on processors.maxDemand", over, err)
	}
	if err := over.Validate(); !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != "maxDemand" {
		t.Fatalf("Validate() = %v, want the same FieldError on maxDemand, with no root path", err)
	}
	for _, o := range []processor.Options[int, int]{
		{Concurrency: 0, MaxDemand: 1 << 30, Handle: handle},
		{Concurrency: processor.ConcurrencyLimit + 1, MaxDemand: processor.MaxDemandLimit, Handle: handle},
	} {
		err := o.ValidateAs("processors")
		var errs validate.Errors
		if !errors.As(err, &errs) || errs.Has("processors.maxDemand", "chunkSlots") || len(errs) == 0 {
			t.Fatalf("%+v: %v, want only the tags' rules", o, err)
		}
	}
}

// Guarantee: the default Concurrency, runtime.GOMAXPROCS(0), never takes
// Concurrency past ConcurrencyLimit: on a process with more Ps than that
// (GOMAXPROCS set above it), options that leave Concurrency zero are still
// valid, with ConcurrencyLimit processors.
func TestDefaultConcurrencyWithinItsBound(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(processor.ConcurrencyLimit + 1))
	o := processor.Options[int, int]{Handle: func(context.Context, *message.Message[int]) (int, error) { return 0, nil }}.WithDefaults()
	if o.Concurrency != processor.ConcurrencyLimit {
		t.Errorf("default Concurrency with GOMAXPROCS %d = %d, want ConcurrencyLimit (%d)", runtime.GOMAXPROCS(0), o.Concurrency, processor.ConcurrencyLimit)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
}
