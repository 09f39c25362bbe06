package topology_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: on a sequenced topology, a letter marked Resume that is not
// the message its key has out (a copy another reader of the group held,
// delivered again to this one after a rebalance or a restart) waits for
// its key's turn like any other letter: it takes no second turn beside
// the key's message in flight or out, so the key's later letters still
// wait for that message to come back from its hold queue.
func TestACopyMarkedResumeThatIsNotTheKeysMessageOutWaitsItsTurn(t *testing.T) {
	for _, c := range []struct {
		name string
		// out: the copy arrives once the key's message is out in its
		// hold queue; otherwise while it is in flight.
		out bool
	}{{"while the key's message is in flight", false}, {"while the key's message is out", true}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, q := declareMemory(t, build(t, topology.New("ledger").Sequenced(topology.Skip).Hold(time.Second).DLQ()))
				gate := make(chan struct{})
				var mu sync.Mutex
				var handled []int
				_, p := startPipeline(t, q, func(ctx context.Context, m *message.Message[int]) (int, error) {
					d, _ := topology.DeliveryOf(m)
					if m.Data == 1 && d.Retries == 0 {
						select {
						case <-gate:
						case <-ctx.Done():
							return 0, ctx.Err()
						}
					}
					mu.Lock()
					handled = append(handled, m.Data)
					mu.Unlock()
					if m.Data == 1 && d.Retries == 0 {
						return 0, topology.Retry(errors.New("gateway down"))
					}
					return m.Data, nil
				})
				pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{Key: func(int) string { return "A" }})
				if err := pub.Publish(t.Context(), 1); err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // A1 in its handler
				if c.out {
					close(gate)
					synctest.Wait() // A1 out in its hold queue
				}
				// A copy of an earlier message of A that another reader
				// held: it comes back marked Resume, with its own history.
				failed := time.Now().Add(-time.Hour)
				stray := topology.Letter[int]{Value: 0, Key: "A", Shard: topology.ShardOf("A", topology.DefaultRoutingShards),
					Retries: 1, FirstFailure: failed, LastFailure: failed, Resume: true}
				if err := q.Requeue(t.Context(), stray); err != nil {
					t.Fatal(err)
				}
				if err := pub.Publish(t.Context(), 2); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if !c.out {
					close(gate)
				}
				time.Sleep(time.Minute) // fake time: A1's retry falls due and comes back
				synctest.Wait()
				if err := p.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if i := slices.Index(handled, 2); i < 0 || slices.Index(handled[i:], 1) >= 0 || slices.Index(handled[1:], 1) < 0 {
					t.Fatalf("key A handled %v, want A1, its retry, then A2 (the copy 0 anywhere after A1's first attempt)", handled)
				}
			})
		})
	}
}
