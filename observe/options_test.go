package observe_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: a nil Logger defaults to slog.Default(), a logger that is set
// is kept, and the defaults are valid.
func TestOptionsDefaultTheLogger(t *testing.T) {
	if got := (observe.Options{}).WithDefaults().Logger; got != slog.Default() {
		t.Fatalf("WithDefaults().Logger = %p, want slog.Default() %p", got, slog.Default())
	}
	own := slog.New(slog.DiscardHandler)
	o := observe.Options{Logger: own}.WithDefaults()
	if o.Logger != own {
		t.Fatal("WithDefaults replaced a logger that was set")
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
}

// Guarantee: StatsTimeout defaults to DefaultStatsTimeout, and Validate
// refuses a negative one and one above MaxStatsTimeout, naming the field.
func TestOptionsBoundTheStatsTimeout(t *testing.T) {
	if got := (observe.Options{}).WithDefaults().StatsTimeout; got != observe.DefaultStatsTimeout {
		t.Fatalf("WithDefaults().StatsTimeout = %v, want %v", got, observe.DefaultStatsTimeout)
	}
	for _, d := range []time.Duration{time.Millisecond, observe.MaxStatsTimeout} {
		if err := (observe.Options{StatsTimeout: d}).Validate(); err != nil {
			t.Errorf("Validate() of StatsTimeout %v = %v, want nil", d, err)
		}
	}
	for d, rule := range map[time.Duration]string{-time.Second: "gte", observe.MaxStatsTimeout + 1: "lte"} {
		var errs validate.Errors
		if err := (observe.Options{StatsTimeout: d}).Validate(); !errors.As(err, &errs) || !errs.Has("observe.statsTimeout", rule) {
			t.Errorf("Validate() of StatsTimeout %v = %v, want it to break observe.statsTimeout %s", d, err, rule)
		}
	}
}
