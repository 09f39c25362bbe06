package acker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/within"
)

// nilCtx is the nil context the calls below are given.
var nilCtx context.Context

// Guarantee: Recorder.Wait returns ErrNilContext for a nil context, rather
// than panicking, whether the outcomes it waits for are recorded already
// or not.
func TestANilContextIsAnErrorNotAPanic(t *testing.T) {
	r := acker.NewRecorder(false)
	r.Ack(context.Background(), []acker.Outcome{{ID: 1}}, nil)
	for _, n := range []int{1, 2} {
		if err := within.Run(5*time.Second, func() error { return r.Wait(nilCtx, n) }); !errors.Is(err, acker.ErrNilContext) {
			t.Errorf("Wait(nil ctx, %d) with 1 outcome recorded = %v, want ErrNilContext", n, err)
		}
	}
}
