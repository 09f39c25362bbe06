package processor_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/validate"
)

func handleNothing(context.Context, *message.Message[int]) (int, error) { return 0, nil }

func byNothing(*message.Message[int]) string { return "" }

// Guarantee: WithDefaults sets MaxDemand to DefaultMaxDemand and leaves
// MinDemand and QueueCapacity 0.
func TestProcessorDefaults(t *testing.T) {
	o := processor.Options[int, int]{Handle: handleNothing}.WithDefaults()
	if o.MaxDemand != processor.DefaultMaxDemand || o.MinDemand != 0 || o.QueueCapacity != 0 || o.Concurrency < 1 {
		t.Errorf("defaults %+v, want MaxDemand %d, MinDemand 0, QueueCapacity 0, Concurrency ≥ 1", o, processor.DefaultMaxDemand)
	}
}

// Guarantee: every option is checked against its documented bounds, each
// error names the field and the rule, and a value at its bound is valid.
func TestProcessorOptionBounds(t *testing.T) {
	valid := func(change func(*processor.Options[int, int])) processor.Options[int, int] {
		o := processor.Options[int, int]{Concurrency: 1, MaxDemand: 1, Handle: handleNothing}
		change(&o)
		return o
	}
	for _, c := range []struct {
		name  string
		opts  processor.Options[int, int]
		field string // "" when valid
		rule  string
	}{
		{"MaxDemand at its limit", valid(func(o *processor.Options[int, int]) { o.MaxDemand = processor.MaxDemandLimit }), "", ""},
		{"MaxDemand past its limit", valid(func(o *processor.Options[int, int]) { o.MaxDemand = processor.MaxDemandLimit + 1 }), "processors.maxDemand", "lte"},
		{"chunk slots at their limit", valid(func(o *processor.Options[int, int]) { o.Concurrency, o.MaxDemand = 1024, 1024 }), "", ""},
		{"MaxDemand past its limit with many processors", valid(func(o *processor.Options[int, int]) {
			o.Concurrency, o.MaxDemand = 1000, processor.MaxDemandLimit+1
		}), "processors.maxDemand", "lte"},
		{"MinDemand below MaxDemand", valid(func(o *processor.Options[int, int]) { o.MaxDemand, o.MinDemand = 10, 9 }), "", ""},
		{"MinDemand equal to MaxDemand", valid(func(o *processor.Options[int, int]) { o.MaxDemand, o.MinDemand = 10, 10 }), "processors.minDemand", "ltfield"},
		{"negative MinDemand", valid(func(o *processor.Options[int, int]) { o.MinDemand = -1 }), "processors.minDemand", "gte"},
		{"QueueCapacity at its limit", valid(func(o *processor.Options[int, int]) { o.QueueCapacity = processor.QueueCapacityLimit }), "", ""},
		{"QueueCapacity past its limit", valid(func(o *processor.Options[int, int]) { o.QueueCapacity = processor.QueueCapacityLimit + 1 }), "processors.queueCapacity", "lte"},
		{"negative QueueCapacity", valid(func(o *processor.Options[int, int]) { o.QueueCapacity = -1 }), "processors.queueCapacity", "gte"},
		{"no Handle", valid(func(o *processor.Options[int, int]) { o.Handle = nil }), "processors.handle", "required"},
		{"queues of many processors without PartitionBy", valid(func(o *processor.Options[int, int]) {
			o.Concurrency, o.QueueCapacity = 2, processor.QueueCapacityLimit
		}), "", ""},
		{"queues of partitioned processors past the limit", valid(func(o *processor.Options[int, int]) {
			o.Concurrency, o.QueueCapacity, o.PartitionBy = 2, processor.QueueCapacityLimit, byNothing
		}), "processors.queueCapacity", "queueSlots"},
	} {
		err := c.opts.ValidateAs("processors")
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v, want valid", c.name, err)
			}
			continue
		}
		var errs validate.Errors
		if !errors.As(err, &errs) || len(errs) != 1 || !errs.Has(c.field, c.rule) {
			t.Errorf("%s: %v, want one error on %s, rule %s", c.name, err, c.field, c.rule)
		}
	}
}

// Guarantee: the error on the processors' queues together says how large
// QueueCapacity may be with the Concurrency given.
func TestPartitionedQueueErrorGivesTheLargestCapacity(t *testing.T) {
	o := processor.Options[int, int]{Concurrency: 4, MaxDemand: 1, QueueCapacity: processor.QueueCapacityLimit, PartitionBy: byNothing, Handle: handleNothing}
	err := o.ValidateAs("processors")
	want := "processors.queueCapacity must be ≤ 262144 with partitioned processors"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ValidateAs = %v, want it to say %q", err, want)
	}
}

// Guarantee: an *UnknownBatcherError names the batcher and those the
// pipeline has, and wraps ErrUnknownBatcher.
func TestUnknownBatcherErrorNamesTheBatchers(t *testing.T) {
	var err error = &processor.UnknownBatcherError{Batcher: "s3", Known: []string{"default", "kafka"}}
	if !errors.Is(err, processor.ErrUnknownBatcher) {
		t.Errorf("errors.Is(%v, ErrUnknownBatcher) = false", err)
	}
	if want := `processor: unknown batcher "s3" (the pipeline has ["default" "kafka"])`; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}
