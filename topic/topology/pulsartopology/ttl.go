package pulsartopology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// ErrHoldOutlastsTTL is wrapped by the error of a Declare whose hold is
// not shorter than the message TTL in effect on its hold topic: the broker
// would acknowledge the held letters on the group's subscription before
// they fall due, and they would be lost (see TTLError).
var ErrHoldOutlastsTTL = errors.New("pulsartopology: a hold outlasts its topic's message TTL")

// Admin reads the policies of topics, through the broker's admin REST API
// (a pulsar-client-go client cannot read them over the binary protocol).
// With pulsar-client-go's pulsaradmin package, for example:
//
//	ttl, err := admin.TopicPolicies(false).GetMessageTTL(ctx, *utils.GetTopicName(topic), true) // applied
//	if err != nil || ttl == nil {
//		return 0, err
//	}
//	return time.Duration(*ttl) * time.Second, nil
//
// Its calls must return once their context ends: Declare waits for them,
// and the backend's Close waits for a Declare under way. Their context is
// Declare's, bounded by Options.OperationTimeout, and ends too when Close
// is called, so that a closing does not wait for an admin that does not
// answer (the Declare then returns topology.ErrClosed). An Admin that
// also implements EvictionAdmin has the backlog quotas and subscription
// expiration checked too.
type Admin interface {
	// MessageTTL returns the message TTL in effect on topic (a full name,
	// persistent://tenant/namespace/local): the topic's own policy, else
	// its namespace's, else the broker's default (ttlDurationDefaultInSeconds);
	// zero (or less) when its messages never expire.
	MessageTTL(ctx context.Context, topic string) (time.Duration, error)
}

// AdminFunc is an [Admin] made of a function: MessageTTL calls it.
type AdminFunc func(ctx context.Context, topic string) (time.Duration, error)

// MessageTTL calls f.
func (f AdminFunc) MessageTTL(ctx context.Context, topic string) (time.Duration, error) {
	return f(ctx, topic)
}

// TTLError is the error of a Declare whose hold is not shorter than the
// message TTL in effect on its hold topic: Pulsar acknowledges on every
// subscription the messages older than the TTL, delayed or not, so a held
// letter would be dropped before it falls due. It wraps
// ErrHoldOutlastsTTL. Declare changes no policy: raise the topic's (or
// its namespace's) message TTL above the hold, or remove it, and declare
// again.
type TTLError struct {
	// Topic is the hold topic (a full name).
	Topic string
	// TTL is the message TTL in effect on it.
	TTL time.Duration
	// Hold is the hold's delay.
	Hold time.Duration
}

// Error names the topic, its message TTL and the hold.
func (e *TTLError) Error() string {
	return fmt.Sprintf("pulsartopology: message TTL %s (ttlInSeconds %d) of hold topic %q is not longer than its hold of %s: the broker would acknowledge held letters before they fall due; set the topic's or its namespace's message TTL above %s, or remove it",
		e.TTL, int64(e.TTL/time.Second), e.Topic, e.Hold, e.Hold)
}

// Unwrap returns ErrHoldOutlastsTTL.
func (e *TTLError) Unwrap() error { return ErrHoldOutlastsTTL }

// The log messages of the TTL check.
const (
	msgTTLUnread = "pulsartopology: the message TTL of hold topics and DLQs could not be read; declaring them unchecked: a TTL not longer than a hold drops held letters before they fall due"
	msgDLQTTL    = "pulsartopology: the DLQ has a message TTL: the broker acknowledges dead letters older than it, replayed or not"
)

// checkTTL reads, through Options.Admin, the message TTL in effect on
// q's hold topics and DLQ, and returns a *TTLError for the longest hold
// that is not shorter than its topic's TTL. It logs a WARN for a DLQ with
// a TTL, and one WARN in the backend's life when a TTL cannot be read:
// a declaration does not fail only because it cannot be checked. Without
// Options.Admin it checks nothing.
func (b *Backend[T]) checkTTL(ctx context.Context, q *queues[T]) error {
	admin := b.opts.Admin
	if admin == nil || (len(q.holds) == 0 && q.dlq == "") {
		return nil
	}
	var (
		refused *TTLError
		errs    []error
	)
	actx, end := b.adminContext(ctx)
	defer end()
	read := func(topic string) (time.Duration, bool, error) {
		ttl, err := admin.MessageTTL(actx, topic)
		if err == nil {
			return ttl, true, nil
		}
		if err := b.adminEnded(ctx, "reading the message TTL of topic "+strconv.Quote(topic)); err != nil {
			return 0, false, err
		}
		errs = append(errs, fmt.Errorf("topic %q: %w", topic, err))
		return 0, false, nil
	}
	for _, h := range q.holds {
		ttl, ok, err := read(h.full)
		if err != nil {
			return err
		}
		if ok && ttl > 0 && h.delay >= ttl && (refused == nil || h.delay > refused.Hold) {
			refused = &TTLError{Topic: h.full, TTL: ttl, Hold: h.delay}
		}
	}
	if q.dlq != "" {
		ttl, ok, err := read(q.dlq)
		if err != nil {
			return err
		}
		if ok && ttl > 0 {
			b.log.Warn(msgDLQTTL, slog.String("topic", q.dlq), slog.Duration("ttl", ttl))
		}
	}
	if len(errs) > 0 && b.ttlUnread.CompareAndSwap(false, true) {
		b.log.Warn(msgTTLUnread, slog.Any("error", b.redact(errors.Join(errs...))))
	}
	if refused != nil {
		return refused
	}
	return nil
}

// adminContext returns the context of Declare's calls of Options.Admin:
// ctx, ended too when the backend's Close is called, so that a closing
// does not wait for an admin that does not answer. Call end when done.
func (b *Backend[T]) adminContext(ctx context.Context) (actx context.Context, end func()) {
	actx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(b.closeStarted, cancel)
	return actx, func() {
		stop()
		cancel()
	}
}

// adminEnded returns, after a call of Options.Admin failed, why the
// Declare must end: an error wrapping ErrDeclare and the context's error
// when ctx has ended, topology.ErrClosed when the backend's Close was
// called; nil when neither (the admin failed on its own).
func (b *Backend[T]) adminEnded(ctx context.Context, what string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrDeclare, what, err)
	}
	if b.closeStarted.Err() != nil {
		return topology.ErrClosed
	}
	return nil
}
