package producer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
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

// Guarantee: the zero Options take the documented defaults, a Threshold
// left to its default is Initial/2 rounded down (Refill making up the
// rest), and MaxConsecutiveFailures left to its default is MaxRestarts+1
// once that exceeds 5.
func TestDefaultsAreTheDocumentedOnes(t *testing.T) {
	o := producer.Options[int]{}.WithDefaults()
	if o.Concurrency != 1 {
		t.Errorf("Concurrency %d, want 1", o.Concurrency)
	}
	if want := (producer.Flow{Initial: 100, Threshold: 50, Refill: 50}); o.Flow != want {
		t.Errorf("Flow %+v, want %+v", o.Flow, want)
	}
	want := producer.Restart{MaxRestarts: 3, Window: 5 * time.Second, Backoff: 100 * time.Millisecond,
		MaxBackoff: 5 * time.Second, MaxConsecutiveFailures: 5, MaxFailingTime: 2 * time.Minute}
	if o.Restart != want {
		t.Errorf("Restart %+v, want %+v", o.Restart, want)
	}
	if got, want := (producer.Flow{Initial: 11}).WithDefaults(), (producer.Flow{Initial: 11, Threshold: 5, Refill: 6}); got != want {
		t.Errorf("Flow{Initial: 11} takes %+v, want %+v", got, want)
	}
	for restarts, failures := range map[int]int{4: 5, 5: 6, 9: 10} {
		if got := (producer.Restart{MaxRestarts: restarts}).WithDefaults().MaxConsecutiveFailures; got != failures {
			t.Errorf("MaxRestarts %d: MaxConsecutiveFailures %d, want %d", restarts, got, failures)
		}
	}
}

// Guarantee: a Threshold not below Initial is reported on flow.threshold
// alone: the Refill derived from them stays valid, so that the report
// names only the field the user set wrong.
func TestAThresholdNotBelowInitialIsReportedAlone(t *testing.T) {
	o := producer.Options[int]{Flow: producer.Flow{Initial: 10, Threshold: 10}}.WithDefaults()
	var errs validate.Errors
	if err := o.Validate(); !errors.As(err, &errs) || !errs.Has("flow.threshold", "ltfield") || len(errs) != 1 {
		t.Fatalf("Validate() = %v, want only flow.threshold ltfield", err)
	}
}

// Guarantee: a Threshold left to its default that Initial cannot give (an
// Initial of 1 halves to 0) is reported on flow.threshold, under the root
// ValidateAs is given, besides Initial's own bound.
func TestAnUnderivableThresholdIsReportedOnThreshold(t *testing.T) {
	o := producer.Options[int]{Flow: producer.Flow{Initial: 1}}.WithDefaults()
	var errs validate.Errors
	if err := o.ValidateAs("producer"); !errors.As(err, &errs) || !errs.Has("producer.flow.threshold", "gte") {
		t.Fatalf("ValidateAs = %v, want producer.flow.threshold gte", err)
	}
}

// panickingInfo is a source whose Info panics.
type panickingInfo struct{ producer.SourceFunc[int] }

func (panickingInfo) Info() (producer.Info, error) { panic("options table corrupt") }

// Guarantee: a source whose Info panics is an invalid option, not a crash:
// Validate returns an error wrapping the *message.PanicError.
func TestAPanickingSourceInfoIsAValidationError(t *testing.T) {
	o := producer.Options[int]{Source: panickingInfo{}}.WithDefaults()
	var pe *message.PanicError
	if err := o.Validate(); !errors.As(err, &pe) {
		t.Fatalf("Validate() = %v, want an error wrapping *message.PanicError", err)
	}
}
