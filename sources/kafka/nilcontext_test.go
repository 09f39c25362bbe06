package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/within"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// nilCtx is the nil context the calls below are given.
var nilCtx context.Context

// Guarantee: Run and Close of either client's source return ErrNilContext
// for a nil context, rather than panicking, before doing anything: Run
// connects nothing, and Close leaves the source open, so that a Run
// afterwards is not refused with ErrClosed.
func TestANilContextIsAnErrorNotAPanic(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		opts := kafka.Options{Brokers: []string{"127.0.0.1:1"}, GroupID: "g", Topics: []string{"t"}, Config: testConfig(),
			RevokeTimeout: time.Second}
		src := cl.new(t, opts)
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := src.Close(ctx); err != nil {
				t.Errorf("Close = %v, want nil", err)
			}
		}()
		calls := []within.Call{
			{Name: "Run", F: func() error { return src.Run(nilCtx, new(producer.Stage[[]byte])) }},
			{Name: "Close", F: func() error { return src.Close(nilCtx) }},
		}
		within.Refused(t, 5*time.Second, kafka.ErrNilContext, calls...)
		// Close(nil) left the source open: a Run whose context has ended
		// returns without ErrClosed.
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		run := func() error { return src.Run(ended, new(producer.Stage[[]byte])) }
		if err := within.Run(5*time.Second, run); errors.Is(err, kafka.ErrClosed) {
			t.Errorf("Run after Close(nil) = %v, want the source open", err)
		}
	})
}
