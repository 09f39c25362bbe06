package kafkatopology

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: replaying a Kafka DLQ holds no memory that grows with the
// DLQ's size, whether every letter is replayed, kept or only reported (a
// dry run): Replay pins the DLQ reader's end and reads, requeues or puts
// back, and settles the letters a chunk at a time. Replaying four times
// the letters (8,000 rather than 2,000, of 1 KiB) adds less than 256
// bytes a letter to what Replay holds (what the consumer group's client
// holds varies by some hundreds of KiB from one replay to the next);
// reading the DLQ whole first, or holding the letters kept, adds more
// than 1 KiB a letter.
func TestReplayingALargeDLQHoldsOnlyWhatItKeepsOnKafka(t *testing.T) {
	topologytest.ReplayHeapGrowth(t, 2000, 256, func(t *testing.T) topology.Queues[msg] {
		b := newBackend(t, testbroker.Kafka(t).ListenAddrs(), func(o *Options[msg]) {
			o.ReadAhead = 64
			o.Config.Consumer.Fetch.Default = 32 << 10
		})
		return declare(t, b, topology.New("big").DLQ())
	})
}
