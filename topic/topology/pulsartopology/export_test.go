package pulsartopology

import (
	"context"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// Crash closes b, within ctx, as a crash of its process would.
func (b *Backend[T]) Crash(ctx context.Context) error { return b.crash(ctx) }

// DropProducers waits for the creations of producers under way (each
// bounded by the client's operation timeout), then closes b's producers
// and forgets them, as if no Declare had made them: the next send to each
// topic creates its producer.
func (b *Backend[T]) DropProducers() {
	b.mu.Lock()
	cs := make([]*creation, 0, len(b.creating))
	for _, c := range b.creating {
		cs = append(cs, c)
	}
	b.mu.Unlock()
	for _, c := range cs {
		<-c.done
	}
	b.mu.Lock()
	ps := b.producers
	b.producers = map[string]pulsar.Producer{}
	b.mu.Unlock()
	for _, p := range ps {
		p.Close()
	}
}

// The log messages of the TTL check.
const (
	MsgTTLUnread = msgTTLUnread
	MsgDLQTTL    = msgDLQTTL

	MsgEvictionUnread = msgEvictionUnread
	MsgHoldExpiry     = msgHoldExpiry
)

// LoseMarker makes dead-letter reader r wait for a marker sent a minute
// ago that does not come back, as one another reader dropped.
func LoseMarker[T any](r topology.Reader[T]) {
	d := r.(deadReader[T])
	d.marker, d.markerAt = "lost", time.Now().Add(-markerLife)
}
