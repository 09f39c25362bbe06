package producer_test

import (
	"context"
	"testing"

	"github.com/boulevard-go/boulevard/producer"
)

// advisingSource suggests its own permit window.
type advisingSource struct {
	producer.Basic
	window int
}

func (s advisingSource) Info() (producer.Info, error) { return producer.Info{Window: s.window}, nil }

func (s advisingSource) Run(ctx context.Context, _ *producer.Stage[int]) error {
	<-ctx.Done()
	return nil
}

// Guarantee: a source's Info.Window sets the window when the
// options leave Flow.Initial at 0 (Threshold and Refill following from it);
// a window the user sets wins, and an advice of 0 keeps the default.
func TestSourceInfoWindowIsTheDefaultWindow(t *testing.T) {
	cases := []struct {
		name   string
		advice int
		flow   producer.Flow
		want   producer.Flow
	}{
		{"advised", 512, producer.Flow{}, producer.Flow{Initial: 512, Threshold: 256, Refill: 256}},
		{"advised with the user's threshold", 512, producer.Flow{Threshold: 100}, producer.Flow{Initial: 512, Threshold: 100, Refill: 412}},
		{"user's window wins", 512, producer.Flow{Initial: 20}, producer.Flow{Initial: 20, Threshold: 10, Refill: 10}},
		{"no advice", 0, producer.Flow{}, producer.Flow{Initial: producer.DefaultFlowInitial, Threshold: producer.DefaultFlowThreshold, Refill: producer.DefaultFlowRefill}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := producer.Options[int]{Source: advisingSource{window: c.advice}, Flow: c.flow}.WithDefaults()
			if o.Flow != c.want {
				t.Fatalf("flow %+v, want %+v", o.Flow, c.want)
			}
		})
	}
	// A source without advice gets the default.
	o := producer.Options[int]{Source: producer.SourceFunc[int](advisingSource{}.Run)}.WithDefaults()
	if o.Flow.Initial != producer.DefaultFlowInitial {
		t.Fatalf("window %d without advice, want %d", o.Flow.Initial, producer.DefaultFlowInitial)
	}
}
