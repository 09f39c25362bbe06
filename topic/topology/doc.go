// Package topology declares what a topic needs for failure handling and
// ordering, and carries it out: hold queues for delayed, escalating retries,
// a dead-letter queue with death metadata and replay, and sequenced topics
// that keep each key's messages in publish order through retries.
//
// A topology is described with a [Builder] and declared on a [Backend]
// ([Memory] is the in-memory one), which creates the main topic, the hold
// queues and the DLQ and is idempotent:
//
//	top, err := topology.New("order-settlement").
//		Hold(5 * time.Second).Hold(30 * time.Second).DLQ().Build()
//	q, err := backend.Declare(ctx, top)
//	pub, err := topology.NewPublisher(q, topology.PublisherOptions[Order]{})
//	src, err := topology.NewSource(topology.SourceOptions[Order]{Queues: q})
//
// A [Source] feeds a pipeline and turns each message's outcome into an
// action: success acks it; an error wrapping [Retry] (or a plain error)
// sends it to a hold queue; [Reject] (or a failure hook's
// acker.DispositionDiscard) dead-letters it; [Defer] sends it through a hold
// queue without counting a retry. [Decide] states the rules. A source made
// by [NewDeadSource] feeds a pipeline from the DLQ, and [Replay] puts dead
// letters back. Package topologytest is the suite every backend passes.
// docs/topology.md describes the model in full.
package topology
