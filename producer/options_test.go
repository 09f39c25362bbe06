package producer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: Validate reports a broken rule with the field's own path, and
// ValidateAs the same rule with the path rooted where it is given.
func TestValidateNamesTheFieldWithOrWithoutARoot(t *testing.T) {
	o := producer.Options[int]{}.WithDefaults()
	o.Flow.Initial = 1
	var errs validate.Errors
	if err := o.Validate(); !errors.As(err, &errs) || !errs.Has("flow.initial", "gte") {
		t.Fatalf("Validate() = %v, want flow.initial gte", err)
	}
	if err := o.ValidateAs("producer"); !errors.As(err, &errs) || !errs.Has("producer.flow.initial", "gte") {
		t.Fatalf("ValidateAs = %v, want producer.flow.initial gte", err)
	}
	o.Flow = producer.Flow{}.WithDefaults()
	if err := o.Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
}

// Guarantee: Restart.Backoff above MaxBackoffLimit is refused with an
// error naming restart.backoff and its upper bound, and MaxBackoffLimit
// itself is accepted.
func TestRestartBackoffHasAnUpperBound(t *testing.T) {
	o := producer.Options[int]{Restart: producer.Restart{Backoff: producer.MaxBackoffLimit + time.Nanosecond}}.WithDefaults()
	var errs validate.Errors
	if err := o.Validate(); !errors.As(err, &errs) || !errs.Has("restart.backoff", "lte") {
		t.Fatalf("Validate() = %v, want restart.backoff lte", err)
	}
	o = producer.Options[int]{Restart: producer.Restart{Backoff: producer.MaxBackoffLimit}}.WithDefaults()
	if err := o.Validate(); err != nil {
		t.Fatalf("Backoff at MaxBackoffLimit: %v", err)
	}
}
