package pulsartopology_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: replaying a Pulsar DLQ holds no memory that grows with the
// DLQ's size, whether every letter is replayed, kept or only reported (a
// dry run): Replay pins the DLQ reader's end with a marker and reads,
// requeues or puts back, and acknowledges the letters a chunk at a
// time. Replaying four times the letters (8,000 rather than 2,000, of
// 1 KiB) adds less than 256 bytes a letter to what Replay holds. What a replay holds besides its chunk varies by some hundreds
// of KiB from one replay to the next, whatever the DLQ's size: the
// client's receiver queue and the broker's dispatch to it (ReadAhead 64
// messages in flight), the acknowledgements the client groups before it
// sends them (up to 1,000 ids), and its connection's buffers. Reading the
// DLQ whole first adds about 1.5 KiB a letter.
func TestReplayingALargeDLQHoldsOnlyWhatItKeepsOnPulsar(t *testing.T) {
	topologytest.ReplayHeapGrowth(t, 2000, 256, func(t *testing.T) topology.Queues[topologytest.Msg] {
		o := options(testbroker.Pulsar(t), topic.Codec[topologytest.Msg](topic.JSONCodec[topologytest.Msg]{}))
		o.ReadAhead = 64
		q, err := newBackend(t, o).Declare(t.Context(), build(t, topology.New("big").DLQ()))
		if err != nil {
			t.Fatal(err)
		}
		return q
	})
}
