// Package sourcewire connects the pipeline to the producer runtime, which
// package producer keeps unexported: its public surface is the source
// contract (Source, Stage, Feed) and the options, not the machinery that
// runs them.
//
// Package producer sets New when it is initialised; the pipeline (and tests
// that run a source without one) call it. It is not generic: the producer
// options carry their message type, and New returns the runtime as an any
// that the caller asserts to an interface of the methods it uses (Run,
// StopFetching, Close, Stages, Status, the rate limit methods).
package sourcewire

import (
	"log/slog"

	"github.com/boulevard-go/boulevard/internal/release"
)

// New builds the producer runtime of a pipeline named name: opts is a
// producer.Options[T] that carries its defaults and was validated, out the
// processors' input (its Publish, and TryPublish when it has one, over
// []*message.Message[T]), rel the pipeline's release signal, which its
// feeds' FlushInFlight begins (nil: none). Nothing starts until the
// runtime's Run.
var New func(opts any, name string, log *slog.Logger, out any, rel *release.Signal) any
