package message

import "time"

// Trigger says why a batch was emitted.
type Trigger uint8

const (
	// TriggerSize means the batch reached its batcher's BatchSize.
	TriggerSize Trigger = iota
	// TriggerTimeout means BatchTimeout passed since the batch's first message.
	TriggerTimeout
	// TriggerFlush means a message in flush mode joined the batch, the
	// pipeline is draining, or a source is releasing a feed and waits for
	// its messages in flight (producer.Feed.FlushInFlight).
	TriggerFlush
	// TriggerWeight means the batch reached its batcher's MaxWeight, or the
	// next message would have pushed it past MaxWeight.
	TriggerWeight
)

// String returns "size", "timeout", "flush" or "weight".
func (t Trigger) String() string {
	switch t {
	case TriggerSize:
		return "size"
	case TriggerTimeout:
		return "timeout"
	case TriggerWeight:
		return "weight"
	default:
		return "flush"
	}
}

// BatchInfo describes a batch to its batch handler.
type BatchInfo struct {
	// Batcher is the name of the batcher that built the batch.
	Batcher string
	// BatchKey is the batch key all messages of the batch share.
	BatchKey string
	// Partition is the batcher partition that built the batch: 0 unless the
	// batcher is partitioned with PartitionBy.
	Partition int
	// Size is the number of messages in the batch.
	Size int
	// Weight is the total weight of the batch's messages when its batcher
	// has a Weight function; 0 otherwise.
	Weight int
	// Trigger says why the batch was emitted.
	Trigger Trigger
	// Started is when the batch's first message arrived at the batcher.
	Started time.Time
}

// Batch is a group of messages with the same batcher and batch key, as it
// travels from a batcher to a batch processor.
type Batch[T any] struct {
	// Messages are the batch's messages, in arrival order.
	Messages []*Message[T]
	// Info describes the batch.
	Info BatchInfo
}
