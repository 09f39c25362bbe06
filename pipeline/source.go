package pipeline

import (
	"context"
	"log/slog"

	"github.com/boulevard-go/boulevard/producer"
)

// producerRuntime is what the pipeline uses of the producer runtime, which
// package producer keeps unexported and builds through internal/sourcewire:
// the producer stages that run the source, dispatch its messages to the
// processors and restart it.
type producerRuntime[T any] interface {
	// Run runs every producer stage until the source is exhausted, or
	// ctx (the hard stop) is cancelled; fatal is told when a stage gives
	// up on its source.
	Run(ctx context.Context, fatal func(error))
	// StopFetching ends the source's Run calls; what was delivered is
	// still dispatched.
	StopFetching()
	// Abandon closes the stages' Abandoned channel: the stages have
	// returned from a drain that was cut short.
	Abandon()
	// Close closes the source, once every stage has returned.
	Close(ctx context.Context) error
	// Stages are the producer stages, in order.
	Stages() []*producer.Stage[T]
	// Status is the state of every stage, in order.
	Status() []producer.StageStatus
	// SetRateLimit, RateLimit, UpdateRateLimit and ResetRateLimit read
	// and change the rate limit all stages share.
	SetRateLimit(rl *producer.RateLimit)
	RateLimit() *producer.RateLimit
	UpdateRateLimit(fn func(rl *producer.RateLimit) error) error
	ResetRateLimit() error
}

// withStack returns attrs, followed by a "stack" attribute when err
// carries the stack of a panic or an exit in the source's code
// (producer.FailureStack).
func withStack(err error, attrs ...any) []any {
	if st := producer.FailureStack(err); st != nil {
		attrs = append(attrs, slog.String("stack", string(st)))
	}
	return attrs
}
