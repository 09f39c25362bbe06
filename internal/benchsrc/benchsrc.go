// Package benchsrc is what the benchmarks of several packages share: a
// source delivering reused messages from a slab (so that a benchmark
// measures the pipeline, not the allocator), an acknowledger that counts,
// and telemetry hooks that do nothing (also for the bench module's
// -telemetry-cost).
package benchsrc

import (
	"context"
	"sync/atomic"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/telemetry"
)

// EmptyHooks returns telemetry hooks with every hook set to a function that
// does nothing, to measure what calling them costs.
func EmptyHooks() *telemetry.Hooks {
	return &telemetry.Hooks{
		PipelineStart:    func(context.Context, telemetry.Pipeline) {},
		PipelineStop:     func(context.Context, telemetry.Pipeline) {},
		ChunkStart:       func(context.Context, telemetry.Chunk) {},
		ChunkStop:        func(context.Context, telemetry.Chunk) {},
		MessageStart:     func(context.Context, telemetry.Message) {},
		MessageStop:      func(context.Context, telemetry.Message) {},
		MessageException: func(context.Context, telemetry.Message) {},
		HandleFailed:     func(context.Context, telemetry.Failed) {},
		BatchEmit:        func(context.Context, telemetry.Batch) {},
		BatchStart:       func(context.Context, telemetry.Batch) {},
		BatchStop:        func(context.Context, telemetry.Batch) {},
	}
}

// Counter counts acknowledged messages, successful or failed.
type Counter struct{ N atomic.Int64 }

// Ack implements acker.Acknowledger.
func (c *Counter) Ack(_ context.Context, ok, failed []acker.Outcome) {
	c.N.Add(int64(len(ok) + len(failed)))
}

// Slab delivers N reused messages (payload and id i), in chunks of 64 as
// its permits allow, once Start is closed; then it is exhausted.
type Slab struct {
	producer.Basic
	N     int
	Start chan struct{}
	Ack   acker.Acknowledger
	// Metadata, when set, is every message's Metadata (one value shared
	// by all of them, as a source's per-record metadata would be without
	// its allocation).
	Metadata any
	slab     []message.Message[int]
}

// NewSlab returns a Slab of n messages acknowledged to ack.
func NewSlab(n int, ack acker.Acknowledger) *Slab {
	return &Slab{N: n, Start: make(chan struct{}), Ack: ack, slab: make([]message.Message[int], n)}
}

// Run implements producer.Source.
func (s *Slab) Run(ctx context.Context, st *producer.Stage[int]) error {
	feed := st.NewFeed("bench", nil)
	select {
	case <-s.Start:
	case <-ctx.Done():
		return nil
	}
	buf := make([]*message.Message[int], 0, 64)
	for i := 0; i < s.N; {
		k, err := feed.Acquire(ctx, min(64, s.N-i))
		if err != nil {
			return nil
		}
		for j := range k {
			m := &s.slab[i+j]
			m.Init(i+j, s.Ack, uint64(i+j))
			if s.Metadata != nil {
				m.Metadata = s.Metadata
			}
			buf = append(buf, m)
		}
		feed.Deliver(buf...)
		clear(buf)
		buf = buf[:0]
		i += k
	}
	return nil
}
