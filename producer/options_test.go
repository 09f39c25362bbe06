package producer_test

import (
	"errors"
	"testing"

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
