package batcher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: Validate reports a broken rule with the field's own name, and
// ValidateAs the same rule with the field rooted at the path it is given.
func TestValidateNamesTheFieldWithOrWithoutARoot(t *testing.T) {
	handle := func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil }
	o := batcher.Options[int]{Name: "out", Handle: handle}.WithDefaults()
	o.BatchSize = batcher.BatchSizeLimit + 1
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
	handle := func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil }
	o := batcher.Options[int]{Name: "out", Handle: handle, BatchTimeout: batcher.BatchTimeoutLimit + time.Nanosecond}.WithDefaults()
	var errs validate.Errors
	if err := o.Validate(); !errors.As(err, &errs) || !errs.Has("batchTimeout", "lte") || errs[0].Message != "batchTimeout must be ≤ 24h" {
		t.Fatalf("Validate() = %v, want batchTimeout must be ≤ 24h", err)
	}
	o.BatchTimeout = batcher.BatchTimeoutLimit
	if err := o.Validate(); err != nil {
		t.Fatalf("BatchTimeout at BatchTimeoutLimit: %v", err)
	}
}
