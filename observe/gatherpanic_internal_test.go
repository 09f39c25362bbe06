package observe

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: the error of a Gather of the caller's gatherer that panicked
// carries the panic as the rest of the module does: errors.As finds its
// *message.PanicError, and errors.Is the error it panicked with.
func TestTheErrorOfAGatherThatPanickedCarriesThePanic(t *testing.T) {
	broken := errors.New("the registry is broken")
	p := &partialGatherer{g: prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { panic(broken) }),
		log: slog.New(slog.DiscardHandler), timeout: time.Minute}
	mfs, err := p.Gather()
	if mfs != nil || !errors.Is(err, broken) {
		t.Fatalf("Gather = %v, %v; want nothing and an error wrapping the panic's", mfs, err)
	}
	if pe, ok := errors.AsType[*message.PanicError](err); !ok || pe.Value != broken || len(pe.Stack) == 0 {
		t.Errorf("Gather = %v, want an error wrapping the *message.PanicError of the panic, with its stack", err)
	}
	if want := "observe: the gatherer's Gather panicked: the registry is broken"; err.Error() != want {
		t.Errorf("Gather's error says %q, want %q", err, want)
	}
}
