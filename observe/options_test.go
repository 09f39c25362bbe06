package observe_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
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

// Guarantee: New bounds the StatsTimeout it is given as documented: a
// Stats that blocks is waited for DefaultStatsTimeout when StatsTimeout
// is 0 or negative, and MaxStatsTimeout at most when it is longer, so
// that a scrape, a check or an Add is never held longer than that.
func TestNewBoundsTheStatsTimeoutItIsGiven(t *testing.T) {
	for _, c := range []struct{ given, want time.Duration }{
		{0, observe.DefaultStatsTimeout},
		{-time.Second, observe.DefaultStatsTimeout},
		{time.Hour, observe.MaxStatsTimeout},
		{time.Second, time.Second},
	} {
		synctest.Test(t, func(t *testing.T) {
			release := make(chan struct{})
			obs := observe.New(observe.Options{StatsTimeout: c.given, Logger: slog.New(slog.DiscardHandler)})
			start := time.Now()
			err := obs.Add(context.Background(), statsFunc(func() pipeline.Stats {
				<-release
				return pipeline.Stats{Name: "blocked"}
			}))
			if took := time.Since(start); took != c.want || !errors.Is(err, observe.ErrStats) {
				t.Errorf("StatsTimeout %v: Add returned %v after %v, want an error wrapping ErrStats after %v", c.given, err, took, c.want)
			}
			close(release)
			if err := obs.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
