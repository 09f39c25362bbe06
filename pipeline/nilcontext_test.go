package pipeline_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/within"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
)

// Guarantee: Start, Run, Push, Test and Stop refuse a nil context with
// ErrNilContext and leave the pipeline as it was: it can still be started,
// fed and stopped.
func TestStartAndRunRefuseANilContextAndLeaveThePipelineUsable(t *testing.T) {
	p := pushOnly(t)
	//lint:ignore SA1012 the nil context is the misuse under test
	if err := within.Run(5*time.Second, func() error { return p.Start(nil) }); !errors.Is(err, pipeline.ErrNilContext) {
		t.Errorf("Start(nil) = %v, want ErrNilContext", err)
	}
	//lint:ignore SA1012 the nil context is the misuse under test
	if err := within.Run(5*time.Second, func() error { return p.Run(nil) }); !errors.Is(err, pipeline.ErrNilContext) {
		t.Errorf("Run(nil) = %v, want ErrNilContext", err)
	}
	ctx := ctxT(t, 10*time.Second)
	if err := within.Run(5*time.Second, func() error { return p.Start(ctx) }); err != nil {
		t.Errorf("Start after Start(nil) and Run(nil) = %v, want nil", err)
	}
	nilCalls := map[string]func() error{
		"Push": func() error { return p.Push(nil, message.New[uint64](1, nil, 1)) }, //lint:ignore SA1012 the misuse under test
		"Test": func() error { _, err := p.Test(nil, 1); return err },               //lint:ignore SA1012 the misuse under test
		"Stop": func() error { return p.Stop(nil) },                                 //lint:ignore SA1012 the misuse under test
	}
	for name, f := range nilCalls {
		if err := within.Run(5*time.Second, f); !errors.Is(err, pipeline.ErrNilContext) {
			t.Errorf("%s(nil) while running = %v, want ErrNilContext", name, err)
		}
	}
	testOne := func() error {
		out, err := p.Test(ctx, 7)
		if err == nil && (len(out) != 1 || out[0].Err != nil) {
			err = fmt.Errorf("outcomes %+v", out)
		}
		return err
	}
	if err := within.Run(5*time.Second, testOne); err != nil {
		t.Errorf("Test after the nil contexts = %v, want one success", err)
	}
	if err := within.Run(5*time.Second, func() error { return p.Stop(ctx) }); err != nil {
		t.Fatalf("Stop after Start(nil) and Run(nil) = %v, want nil", err)
	}
}
