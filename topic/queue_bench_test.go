package topic

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/benchchan"
)

// benchCapacity is the capacity of the topics' queues and rings and of the
// buffered channels they are compared with.
const benchCapacity = 1024

// benchBatch is the receive buffer length of the batch variants.
const benchBatch = 64

var benchReceivers = []int{1, 4, 16}

// benchChan is the buffered-channel baseline of a balanced topic.
func benchChan(b *testing.B, batch bool, receivers int) {
	benchchan.Handoff(b, benchCapacity, benchBatch, batch, receivers)
}
