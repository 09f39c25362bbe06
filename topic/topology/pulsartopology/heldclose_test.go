package pulsartopology_test

import (
	"context"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// Guarantee: the backend's Close returns by its context's deadline (300ms,
// far below the client's operation timeout of a minute), with an error
// wrapping context.DeadlineExceeded, while the broker holds its answer to
// a call under way or to the closing itself: the partition lookup or
// lookup of a Declare, the receipt of a Publish, the partition lookup,
// lookup or subscribe of a reader's Subscribe, or the close of the
// backend's producers. What is still closing is left to the background.
func TestCloseReturnsByItsDeadlineWhileTheBrokerHoldsACallsAnswer(t *testing.T) {
	for _, c := range []struct {
		name string
		cmd  pulsartest.Command
		call func(ctx context.Context, b *pulsartopology.Backend[string], q topology.Queues[string]) error
	}{
		{"declare/PARTITIONED_METADATA", pulsartest.CommandPartitionedMetadata, declareAnother},
		{"declare/LOOKUP", pulsartest.CommandLookup, declareAnother},
		{"publish/SEND", pulsartest.CommandSend, func(ctx context.Context, _ *pulsartopology.Backend[string], q topology.Queues[string]) error {
			return q.Publish(ctx, topology.Letter[string]{Value: "held"})
		}},
		{"subscribe/PARTITIONED_METADATA", pulsartest.CommandPartitionedMetadata, subscribeAnother},
		{"subscribe/LOOKUP", pulsartest.CommandLookup, subscribeAnother},
		{"subscribe/SUBSCRIBE", pulsartest.CommandSubscribe, subscribeAnother},
		{"close/CLOSE_PRODUCER", pulsartest.CommandCloseProducer, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			br := testbroker.Pulsar(t)
			b := patientBackend(t, br)
			q, _ := declared(t, b, build(t, topology.New("held").Hold(time.Second).DLQ()))
			if err := q.Publish(ctxT(t), topology.Letter[string]{Value: "p"}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(br.Withhold(c.cmd))
			if c.call == nil {
				testbroker.ClosesByDeadline(t, "Close with a "+c.name+" withheld", b.Close)
				return
			}
			testbroker.ClosesByDeadlineWhileHeld(t, br, "a "+c.name, func(ctx context.Context) error { return c.call(ctx, b, q) }, b.Close)
		})
	}
}

// declareAnother declares a topology of its own on b.
func declareAnother(ctx context.Context, b *pulsartopology.Backend[string], _ topology.Queues[string]) error {
	top, err := topology.New("declared").Hold(time.Second).DLQ().Build()
	if err != nil {
		return err
	}
	_, err = b.Declare(ctx, top)
	return err
}

// subscribeAnother subscribes another reader of q's group.
func subscribeAnother(ctx context.Context, _ *pulsartopology.Backend[string], q topology.Queues[string]) error {
	_, err := q.Subscribe(ctx)
	return err
}
