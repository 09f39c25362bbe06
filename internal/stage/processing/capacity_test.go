package processing_test

import (
	"context"
	"testing"

	"github.com/boulevard-go/boulevard/internal/stage/processing"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
)

// Guarantee: each processor queue has the capacity New documents: with
// PartitionBy max(2·MaxDemand, 64, min(MinQueue, 2²⁰/Concurrency)) for
// each, without it max(2·Concurrency·MaxDemand, 64, min(MinQueue, 2²⁰)),
// so that a huge permit window does not make the queues huge.
func TestQueueCapacityFollowsTheOptions(t *testing.T) {
	key := func(m *message.Message[int]) string { return "" }
	handle := func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }
	for _, c := range []struct {
		name     string
		opts     processor.Options[int, int]
		minQueue int
		want     int
	}{
		{"partitioned, MaxDemand", processor.Options[int, int]{Concurrency: 2, MaxDemand: 100, PartitionBy: key}, 0, 200},
		{"partitioned, window", processor.Options[int, int]{Concurrency: 2, MaxDemand: 100, PartitionBy: key}, 1000, 1000},
		{"partitioned, window bounded", processor.Options[int, int]{Concurrency: 4, MaxDemand: 100, PartitionBy: key}, 1 << 22, 1 << 18},
		{"shared, MaxDemand", processor.Options[int, int]{Concurrency: 2, MaxDemand: 100}, 0, 400},
		{"shared, window bounded", processor.Options[int, int]{Concurrency: 2, MaxDemand: 100}, 1 << 22, 1 << 20},
		{"shared, at least 64", processor.Options[int, int]{Concurrency: 1, MaxDemand: 1}, 0, 64},
	} {
		c.opts.Handle = handle
		s := processing.New(c.opts.WithDefaults(), processing.Config[int]{Name: t.Name(), MinQueue: c.minQueue})
		if got := s.QueueCapacity(); got != c.want {
			t.Errorf("%s: QueueCapacity %d, want %d", c.name, got, c.want)
		}
	}
}
