package pulsartopology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/boulevard-go/boulevard/internal/group"
	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// ErrAbandoned is wrapped, with ErrDeclare, ErrSubscribe or ErrSend and
// context.DeadlineExceeded, by the error of a call that gave up waiting
// for the client after Options.OperationTimeout: the client's call was
// abandoned (see the package documentation, Bounded calls).
var ErrAbandoned = errors.New("pulsartopology: the client did not return within Options.OperationTimeout; its call was abandoned")

// ErrConnect is wrapped, with the call's own cause, by the error of a
// Declare or a Subscribe (with ErrDeclare or ErrSubscribe), or of a send
// (Publish, Hold, Requeue, DeadLetter, a dead-letter reader's marker;
// with ErrSend), that failed while the client could not reach the
// broker, or while the broker refused its credentials, and by that of a
// send on a producer the backend has made when the client has connected
// to no broker since its latest failure to connect. The error names the
// broker's service URL, without its user information, and the client's
// latest connection failure ("connection refused", "Failed to
// authenticate"). Only a client made by sources/pulsar's NewClient (as
// the backend's own is) tells its connection failures.
var ErrConnect = errors.New("pulsartopology: cannot connect to the Pulsar broker")

// bounded runs call on a goroutine of the backend and waits for it within
// ctx and Options.OperationTimeout. pulsar-client-go's CreateProducer and
// Subscribe, and the topic lookups they make, take no context: each waits
// for the broker's answer up to the client's operation timeout, or for
// ever when the client deadlocks. When ctx ends before call returns,
// bounded returns an error wrapping kind and ctx.Err() that names what
// was under way (what); past Options.OperationTimeout, one wrapping kind,
// ErrAbandoned and context.DeadlineExceeded (see abandon). Either way
// call goes on until the client returns, and then hands what it made, if
// anything, to release; the backend's Close waits for it until
// Options.OperationTimeout has passed since it began, and no longer. A
// call that returned just as ctx ended may be handed to either. Once the
// backend is closed, bounded returns topology.ErrClosed.
func bounded[T, R any](ctx context.Context, b *Backend[T], kind error, what string, call func() (R, error), release func(R)) (R, error) {
	var zero R
	if err := ctx.Err(); err != nil {
		return zero, fmt.Errorf("%w: %s: %w", kind, what, err)
	}
	began := time.Now()
	r, err := group.Await(ctx, &b.calls, b.opts.OperationTimeout, call, release)
	switch {
	case errors.Is(err, group.ErrShut):
		return zero, topology.ErrClosed
	case errors.Is(err, group.ErrAbandoned):
		return zero, b.unreached(fmt.Errorf("%w: %s: %w", kind, what, b.abandon(what)), began)
	case err != nil && err == ctx.Err():
		return zero, b.unreached(fmt.Errorf("%w: %s: %w", kind, what, err), began)
	case err != nil && !errors.Is(err, topology.ErrClosed):
		return zero, b.failed(err, began)
	}
	return r, b.redact(err)
}

// failed returns err, the error of a client call begun at began, through
// the client's redaction and, unless it wraps topology.ErrClosed, wrapping
// ErrConnect and naming the broker and the client's latest connection
// failure since began, when the client logged one (see unreached).
func (b *Backend[T]) failed(err error, began time.Time) error {
	if err == nil || errors.Is(err, topology.ErrClosed) {
		return b.redact(err)
	}
	return b.unreached(b.redact(err), began)
}

// unreached returns err, the error of a call begun at began, wrapping
// ErrConnect and naming the broker and the client's latest connection
// failure since began, when the client (one the backend made, or one
// sources/pulsar's NewClient made) logged one; otherwise err.
func (b *Backend[T]) unreached(err error, began time.Time) error {
	if c, ok := b.client.(*spulsar.Client); ok {
		return c.Unreached(ErrConnect, err, began)
	}
	return err
}

// disconnected returns err, the error of a send on a producer the backend
// has, begun at began, wrapping ErrConnect and naming the broker and the
// client's latest connection failure when the client (one the backend
// made, or one sources/pulsar's NewClient made) logged one since began or
// has connected to no broker since its latest (see
// sources/pulsar's Client.Disconnected); otherwise err.
func (b *Backend[T]) disconnected(err error, began time.Time) error {
	if c, ok := b.client.(*spulsar.Client); ok {
		return c.Disconnected(ErrConnect, err, began)
	}
	return err
}

// redact passes an error of the client through its redaction
// (sources/pulsar's RedactError): a broker that echoes the token or
// password the client was created with, in a refusal the client reports,
// does not show them in the backend's errors.
func (b *Backend[T]) redact(err error) error { return spulsar.RedactError(b.client, err) }

// abandon logs one ERROR line for a client call (what) abandoned after
// Options.OperationTimeout, and returns the error that says so, wrapping
// ErrAbandoned and context.DeadlineExceeded.
func (b *Backend[T]) abandon(what string) error {
	b.log.Error("pulsartopology: the client did not return within the operation timeout; its call is abandoned, and what it makes if it ever returns is closed",
		slog.String("call", what), slog.Duration("timeout", b.opts.OperationTimeout))
	return fmt.Errorf("%w (%s): %w", ErrAbandoned, b.opts.OperationTimeout, context.DeadlineExceeded)
}
