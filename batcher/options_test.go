package batcher_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/validate"
)

// validBatcher returns valid options with their defaults, changed by set.
func validBatcher(set func(o *batcher.Options[int])) batcher.Options[int] {
	o := batcher.Options[int]{Name: "out", Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil }}.WithDefaults()
	set(&o)
	return o
}

// byKey is a PartitionBy that sends every message to one partition.
func byKey(*message.Message[int]) string { return "" }

// Guarantee: Validate reports a broken rule with the field's own name, and
// ValidateAs the same rule with the field rooted at the path it is given.
func TestValidateNamesTheFieldWithOrWithoutARoot(t *testing.T) {
	o := validBatcher(func(o *batcher.Options[int]) { o.BatchSize = batcher.BatchSizeLimit + 1 })
	var errs validate.Errors
	if err := o.Validate(); !errors.As(err, &errs) || !errs.Has("batchSize", "lte") {
		t.Fatalf("Validate() = %v, want batchSize lte", err)
	}
	if err := o.ValidateAs("batchers[2]"); !errors.As(err, &errs) || !errs.Has("batchers[2].batchSize", "lte") {
		t.Fatalf("ValidateAs = %v, want batchers[2].batchSize lte", err)
	}
	o.BatchSize = 1
	if err := o.Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
}

// Guarantee: BatchTimeout above BatchTimeoutLimit is refused with an error
// naming batchTimeout and its upper bound, and the limit itself is
// accepted.
func TestBatchTimeoutHasAnUpperBound(t *testing.T) {
	o := validBatcher(func(o *batcher.Options[int]) { o.BatchTimeout = batcher.BatchTimeoutLimit + time.Nanosecond })
	var errs validate.Errors
	if err := o.Validate(); !errors.As(err, &errs) || !errs.Has("batchTimeout", "lte") || errs[0].Message != "batchTimeout must be ≤ 24h" {
		t.Fatalf("Validate() = %v, want batchTimeout must be ≤ 24h", err)
	}
	o.BatchTimeout = batcher.BatchTimeoutLimit
	if err := o.Validate(); err != nil {
		t.Fatalf("BatchTimeout at BatchTimeoutLimit: %v", err)
	}
}

// Guarantee: the bound on Concurrency × queue capacity holds only for a
// partitioned batcher: without PartitionBy there is one queue of each
// kind, and each capacity may reach its own limit whatever Concurrency is.
func TestQueueCapacitiesMultiplyOnlyWithPartitionBy(t *testing.T) {
	o := validBatcher(func(o *batcher.Options[int]) {
		o.Concurrency = 4
		o.QueueCapacity, o.BatchQueueCapacity = batcher.QueueCapacityLimit, batcher.BatchQueueCapacityLimit
	})
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate() without PartitionBy = %v, want nil", err)
	}
	o.PartitionBy = byKey
	var errs validate.Errors
	if err := o.Validate(); !errors.As(err, &errs) || len(errs) != 2 ||
		!errs.Has("queueCapacity", "queueSlots") || !errs.Has("batchQueueCapacity", "batchSlots") {
		t.Fatalf("Validate() with PartitionBy = %v, want queueSlots and batchSlots errors", err)
	}
}

// Guarantee: the error on a partitioned batcher's queues together names
// the largest capacity allowed with its Concurrency, the concurrency field
// under the same root, and the rule; the product at the limit is accepted.
func TestPartitionedQueueErrorNamesTheLargestCapacity(t *testing.T) {
	for _, c := range []struct {
		field string
		limit int
		set   func(o *batcher.Options[int], capacity int)
	}{
		{"queueCapacity", batcher.QueueCapacityLimit, func(o *batcher.Options[int], n int) { o.QueueCapacity = n }},
		{"batchQueueCapacity", batcher.BatchQueueCapacityLimit, func(o *batcher.Options[int], n int) { o.BatchQueueCapacity = n }},
	} {
		o := validBatcher(func(o *batcher.Options[int]) { o.PartitionBy, o.Concurrency = byKey, 4 })
		c.set(&o, c.limit/4)
		if err := o.ValidateAs("batchers[1]"); err != nil {
			t.Fatalf("%s at %d with concurrency 4: %v, want it accepted", c.field, c.limit/4, err)
		}
		c.set(&o, c.limit/4+1)
		want := fmt.Sprintf("batchers[1].%s must be ≤ %d with partitionBy and batchers[1].concurrency 4 (concurrency × %s must be ≤ %d)",
			c.field, c.limit/4, c.field, c.limit)
		var errs validate.Errors
		if err := o.ValidateAs("batchers[1]"); !errors.As(err, &errs) || len(errs) != 1 || errs[0].Message != want {
			t.Fatalf("ValidateAs = %v, want %q", err, want)
		}
	}
}

// Guarantee: a partitioned batcher's capacity or Concurrency out of its
// own bounds is reported once, by its own rule, not again as a product of
// the two (which for a negative capacity can wrap around to a large
// positive one).
func TestAPartitionedFieldOutOfItsBoundsIsReportedOnce(t *testing.T) {
	cases := []struct {
		field, rule string
		set         func(o *batcher.Options[int])
	}{
		{"queueCapacity", "lte", func(o *batcher.Options[int]) { o.QueueCapacity = batcher.QueueCapacityLimit + 1 }},
		{"batchQueueCapacity", "lte", func(o *batcher.Options[int]) { o.BatchQueueCapacity = batcher.BatchQueueCapacityLimit + 1 }},
		{"concurrency", "lte", func(o *batcher.Options[int]) {
			o.Concurrency, o.QueueCapacity, o.BatchQueueCapacity = batcher.ConcurrencyLimit+1, 200, 10
		}},
		{"queueCapacity", "gte", func(o *batcher.Options[int]) {
			o.Concurrency, o.QueueCapacity = 2, math.MinInt64+batcher.QueueCapacityLimit
		}},
	}
	for _, c := range cases {
		o := validBatcher(func(o *batcher.Options[int]) { o.PartitionBy, o.Concurrency = byKey, 4; c.set(o) })
		var errs validate.Errors
		if err := o.Validate(); !errors.As(err, &errs) || len(errs) != 1 || !errs.Has(c.field, c.rule) {
			t.Errorf("Validate() = %v, want only %s's %s rule", err, c.field, c.rule)
		}
	}
}

// Guarantee: Weight and MaxWeight set without the other are refused with
// an error that names the missing field and the one that requires it,
// reported with MaxWeight's own bound when MaxWeight is out of it too.
func TestWeightAndMaxWeightNameEachOther(t *testing.T) {
	weight := func(*message.Message[int]) int { return 1 }
	for _, c := range []struct {
		weight func(*message.Message[int]) int
		max    int
		want   []string
	}{
		{weight, 0, []string{"batchers[0].maxWeight is required with weight"}},
		{nil, 10, []string{"batchers[0].weight is required with maxWeight"}},
		{nil, -1, []string{"batchers[0].maxWeight must be ≥ 1", "batchers[0].weight is required with maxWeight"}},
	} {
		o := validBatcher(func(o *batcher.Options[int]) { o.Weight, o.MaxWeight = c.weight, c.max })
		var errs validate.Errors
		if err := o.ValidateAs("batchers[0]"); !errors.As(err, &errs) || !slices.Equal(messages(errs), c.want) {
			t.Errorf("ValidateAs with MaxWeight %d = %v, want %q", c.max, err, c.want)
		}
	}
}

// messages returns the message of each error, in order.
func messages(errs validate.Errors) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Message
	}
	return out
}
