// Package pulsarresub tells when a Pulsar consumer that is alone on its
// non-durable subscription subscribes again, after its connection dropped
// or its topic was unloaded, and so may have missed messages.
//
// pulsar-client-go (v0.21.0) resubscribes a non-durable consumer without a
// start message id, and the broker, which removed the subscription when
// its last consumer left, creates it anew at the latest message: what was
// published while the consumer was away, what the client held in its
// receiver queue and what was nacked and not yet redelivered are lost. On
// a Failover subscription the broker announces the active consumer
// (ACTIVE_CONSUMER_CHANGE) every time it elects one, so a consumer that is
// the only one of its subscription hears that it is active once per
// subscribe: each notice after the first of a topic partition is a
// resubscription. A lone Failover consumer is dispatched to as an
// Exclusive one (the same dispatcher on the broker, the same acks and
// nacks on the client).
package pulsarresub

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/logburst"
)

// Listener is the pulsar.ConsumerEventListener of a consumer that is the
// only one of its Failover subscription: it counts the resubscriptions of
// each topic partition the consumer reads (every notice that it is active
// after the first) and logs each at WARN, with the partition's topic as
// "partition_topic" (a burst in a few lines, see logburst). Make it with
// New before the consumer subscribes; Flush logs the lines still held
// back once the consumer is closed. The client calls it on its connection
// goroutines.
type Listener struct {
	log   *slog.Logger
	total *atomic.Uint64
	n     atomic.Uint64
	lines logburst.Kind

	mu   sync.Mutex
	seen map[string]struct{} // the partitions heard active at least once
}

var _ pulsar.ConsumerEventListener = (*Listener)(nil)

// New returns a Listener that logs its lines on log (nil means
// slog.Default()) with message msg, and counts the resubscriptions (see
// Count), and in total too unless it is nil.
func New(log *slog.Logger, msg string, total *atomic.Uint64) *Listener {
	return &Listener{log: cmp.Or(log, slog.Default()), total: total, lines: logburst.NewKind(0, slog.LevelWarn, msg), seen: make(map[string]struct{}, 1)}
}

// BecameActive implements pulsar.ConsumerEventListener: the first notice
// of a partition is its first subscribe, each later one a resubscription.
func (l *Listener) BecameActive(_ pulsar.Consumer, topicName string, _ int32) {
	l.mu.Lock()
	_, again := l.seen[topicName]
	l.seen[topicName] = struct{}{}
	l.mu.Unlock()
	if !again {
		return
	}
	l.n.Add(1)
	if l.total != nil {
		l.total.Add(1)
	}
	l.lines.Line(context.Background(), l.log, slog.String("partition_topic", topicName))
}

// BecameInactive implements pulsar.ConsumerEventListener. A lone consumer
// is inactive only while the broker still holds its previous connection's
// consumer; the notice that it is active follows once that one is gone.
func (l *Listener) BecameInactive(pulsar.Consumer, string, int32) {}

// Count returns the resubscriptions counted so far.
func (l *Listener) Count() uint64 { return l.n.Load() }

// Flush logs the count of the lines held back since the last one logged,
// if any.
func (l *Listener) Flush(ctx context.Context) { l.lines.FlushHeld(ctx, l.log) }
