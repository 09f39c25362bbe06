package pulsartopology_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: Declares, Subscribes and Publishes racing the backend's
// Close (called as they start) either succeed, and what they made is then
// closed by that Close (a reader's Receive and a declared queue's Publish
// return topology.ErrClosed), or fail with topology.ErrClosed; Close
// returns nil with no consumer nor producer of the backend left open on
// the broker, and none panics nor races.
func TestDeclaresSubscribesAndPublishesRacingTheBackendsCloseSucceedOrReturnErrClosed(t *testing.T) {
	const rounds = 4
	b := testbroker.Pulsar(t)
	for round := range rounds {
		be := newBackend(t, options(b, topic.Codec[string](topic.StringCodec{})))
		grouped, _ := declared(t, be, build(t, topology.New(fmt.Sprintf("grouped-%d", round))))
		broadcast, _ := declared(t, be, build(t, topology.New(fmt.Sprintf("broadcast-%d", round)).Broadcast()))
		type made struct {
			q   topology.Queues[string]
			r   topology.Reader[string]
			err error
		}
		subscribe := func(q topology.Queues[string]) func() made {
			return func() made { r, err := q.Subscribe(ctxT(t)); return made{r: r, err: err} }
		}
		declare := func(name string) func() made {
			return func() made {
				q, err := be.Declare(ctxT(t), build(t, topology.New(name).DLQ()))
				return made{q: q, err: err}
			}
		}
		calls := []func() made{
			subscribe(grouped), subscribe(grouped), subscribe(broadcast),
			declare(fmt.Sprintf("declared-%d-0", round)), declare(fmt.Sprintf("declared-%d-1", round)),
			func() made { return made{err: grouped.Publish(ctxT(t), topology.Letter[string]{Value: "1"})} },
		}
		// Round r closes once r consumers or producers more than the
		// backend had are open: the calls are further under way each round.
		results := testbroker.RacePulsarClose(t, b, round, calls, func() error { return be.Close(context.Background()) })
		refused := 0
		for _, m := range results {
			switch {
			case m.err != nil:
				refused++
				if !errors.Is(m.err, topology.ErrClosed) {
					t.Fatalf("round %d: a call racing the backend's Close = %v, want nil or topology.ErrClosed", round, m.err)
				}
			case m.r != nil:
				if _, err := m.r.Receive(ctxT(t), make([]topology.Letter[string], 1)); !errors.Is(err, topology.ErrClosed) {
					t.Fatalf("round %d: Receive of a reader made while the backend closed = %v, want topology.ErrClosed", round, err)
				}
			case m.q != nil:
				if err := m.q.Publish(ctxT(t), topology.Letter[string]{Value: "2"}); !errors.Is(err, topology.ErrClosed) {
					t.Fatalf("round %d: Publish on queues declared while the backend closed = %v, want topology.ErrClosed", round, err)
				}
			}
		}
		t.Logf("round %d: %d of the %d calls refused", round, refused, len(calls))
	}
}
