package observe_test

import (
	"log/slog"
	"testing"

	"github.com/boulevard-go/boulevard/observe"
)

// Guarantee: a nil Logger defaults to slog.Default(), a logger that is set
// is kept, and no value of Options is invalid.
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
