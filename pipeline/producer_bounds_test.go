package pipeline_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/validate"
)

// producerFields are the bounded producer options, checked with the
// others by TestStageOptionExtremes.
var producerFields = []stageField{
	{"producer.concurrency", func(o *pipeline.Options[uint64, uint64], v int64) { o.Producer.Concurrency = int(v) }, producer.MaxConcurrency},
	{"producer.flow.initial", func(o *pipeline.Options[uint64, uint64], v int64) { o.Producer.Flow.Initial = int(v) }, producer.MaxFlowPermits},
	{"producer.flow.refill", func(o *pipeline.Options[uint64, uint64], v int64) { o.Producer.Flow.Refill = int(v) }, producer.MaxFlowPermits},
	{"producer.rateLimit.allowed", func(o *pipeline.Options[uint64, uint64], v int64) {
		o.Producer.RateLimit = &producer.RateLimit{Allowed: int(v), Interval: time.Second}
	}, producer.MaxRateLimitAllowed},
	{"producer.restart.maxRestarts", func(o *pipeline.Options[uint64, uint64], v int64) { o.Producer.Restart.MaxRestarts = int(v) }, producer.MaxRestartCount},
	{"producer.restart.maxConsecutiveFailures", func(o *pipeline.Options[uint64, uint64], v int64) {
		o.Producer.Restart.MaxConsecutiveFailures = int(v)
	}, producer.MaxRestartCount},
	{"producer.restart.maxFailingTime", func(o *pipeline.Options[uint64, uint64], v int64) {
		o.Producer.Restart.MaxFailingTime = time.Duration(v)
	}, int64(producer.MaxFailingTimeLimit)},
	{"producer.rateLimit.interval", func(o *pipeline.Options[uint64, uint64], v int64) {
		o.Producer.RateLimit = &producer.RateLimit{Allowed: 1, Interval: time.Duration(v)}
	}, int64(producer.MaxRateLimitInterval)},
	{"producer.restart.window", func(o *pipeline.Options[uint64, uint64], v int64) {
		o.Producer.Restart.Window = time.Duration(v)
	}, int64(producer.MaxRestartWindow)},
	{"producer.restart.maxBackoff", func(o *pipeline.Options[uint64, uint64], v int64) {
		o.Producer.Restart.MaxBackoff = time.Duration(v)
	}, int64(producer.MaxBackoffLimit)},
}

// durationBounds are the bounds of the duration options above as their
// messages quote them.
var durationBounds = map[string]string{
	"producer.restart.maxFailingTime": "24h",
	"producer.rateLimit.interval":     "24h",
	"producer.restart.window":         "24h",
	"producer.restart.maxBackoff":     "1h",
}

// boundsOptions returns valid options changed by set.
func boundsOptions(set func(o *pipeline.Options[uint64, uint64])) pipeline.Options[uint64, uint64] {
	o := validOptions()
	set(&o)
	return o
}

// Guarantee: every documented upper bound is itself accepted, and the
// message for a value above it quotes it.
func TestProducerOptionBoundsAreTheDocumentedOnes(t *testing.T) {
	for _, f := range producerFields {
		t.Run(f.field, func(t *testing.T) {
			if _, err := pipeline.New(boundsOptions(func(o *pipeline.Options[uint64, uint64]) { f.set(o, f.max) })); err != nil {
				t.Fatalf("New rejected %s = %d, its documented bound: %v", f.field, f.max, err)
			}
			_, err := pipeline.New(boundsOptions(func(o *pipeline.Options[uint64, uint64]) { f.set(o, f.max+1) }))
			var errs validate.Errors
			if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Field != f.field || errs[0].Rule != "lte" {
				t.Fatalf("New(%s = %d) = %v, want one lte error on it", f.field, f.max+1, err)
			}
			bound := fmt.Sprint(f.max)
			if d, ok := durationBounds[f.field]; ok {
				bound = d
			}
			if want := f.field + " must be ≤ " + bound; errs[0].Message != want {
				t.Fatalf("message %q, want %q", errs[0].Message, want)
			}
		})
	}
}

// Guarantee: a Threshold the user left unset and that cannot be derived from
// a too small Initial is reported as derived, saying what to change, not as
// if the user had set it.
func TestDerivedThresholdNamed(t *testing.T) {
	_, err := pipeline.New(boundsOptions(func(o *pipeline.Options[uint64, uint64]) { o.Producer.Flow = producer.Flow{Initial: 1} }))
	var errs validate.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("New = %v, want validation errors", err)
	}
	want := map[string]string{
		"producer.flow.initial":   "producer.flow.initial must be ≥ 2",
		"producer.flow.threshold": "producer.flow.threshold (derived as initial/2 = 0) must be ≥ 1; set producer.flow.initial ≥ 2",
	}
	if len(errs) != len(want) {
		t.Fatalf("New = %v, want exactly %d problems", err, len(want))
	}
	for _, e := range errs {
		if want[e.Field] != e.Message {
			t.Errorf("%s: %q, want %q", e.Field, e.Message, want[e.Field])
		}
	}
	// An Initial out of bounds is reported alone: the Refill derived from it
	// stays within bounds.
	_, err = pipeline.New(boundsOptions(func(o *pipeline.Options[uint64, uint64]) { o.Producer.Flow = producer.Flow{Initial: 1e12} }))
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Field != "producer.flow.initial" {
		t.Fatalf("New(initial 1e12) = %v, want only producer.flow.initial reported", err)
	}
}

// Guarantee: the rate limit in force is readable, and Topology reports it,
// after SetRateLimit changes or removes it; a rejected limit changes
// nothing, and the value returned is a copy.
func TestRateLimitReadable(t *testing.T) {
	p := mustNew(t, boundsOptions(func(o *pipeline.Options[uint64, uint64]) {
		o.Producer.RateLimit = &producer.RateLimit{Allowed: 10, Interval: time.Second}
	}))
	check := func(step string, want *producer.RateLimit) {
		t.Helper()
		for name, got := range map[string]*producer.RateLimit{"RateLimit": p.RateLimit(), "Topology": p.Topology().Producer.RateLimit} {
			if (got == nil) != (want == nil) || got != nil && *got != *want {
				t.Fatalf("%s: %s() = %+v, want %+v", step, name, got, want)
			}
		}
	}
	check("configured", &producer.RateLimit{Allowed: 10, Interval: time.Second})
	p.RateLimit().Allowed = 99
	check("after changing the copy", &producer.RateLimit{Allowed: 10, Interval: time.Second})

	if err := p.SetRateLimit(&producer.RateLimit{Allowed: 20, Interval: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	check("changed", &producer.RateLimit{Allowed: 20, Interval: 2 * time.Second})
	if !strings.Contains(p.Topology().String(), "rate limit 20 per 2s") {
		t.Fatalf("Topology().String() = %q, want the current rate limit", p.Topology().String())
	}

	err := p.SetRateLimit(&producer.RateLimit{Allowed: producer.MaxRateLimitAllowed + 1, Interval: time.Second})
	if !errors.Is(err, validate.ErrInvalid) || !strings.Contains(err.Error(), "rateLimit.allowed must be ≤") {
		t.Fatalf("SetRateLimit above the bound = %v, want the bound named", err)
	}
	check("after a rejected change", &producer.RateLimit{Allowed: 20, Interval: 2 * time.Second})

	if err := p.SetRateLimit(nil); err != nil {
		t.Fatal(err)
	}
	check("removed", nil)
	if err := p.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
}
