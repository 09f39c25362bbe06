package kafkatopology

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: Declares and Subscribes racing the backend's Close (called
// once the cluster has seen the first request of a kind each round,
// a group join, a topic creation or an offset lookup, so that calls are
// under way) either succeed, and what they made is then closed by that Close (a reader's
// Receive and a declared queue's Publish return topology.ErrClosed), or
// fail with topology.ErrClosed; Close returns nil, and none panics, races
// or leaves a reader, a releaser or a client running.
func TestDeclaresAndSubscribesRacingTheBackendsCloseSucceedOrReturnErrClosed(t *testing.T) {
	c := testbroker.Kafka(t)
	keys := []kmsg.Key{kmsg.JoinGroup, kmsg.CreateTopics, kmsg.ListOffsets}
	for round, key := range keys {
		b := newBackend(t, c.ListenAddrs())
		grouped := declare(t, b, topology.New(fmt.Sprintf("grouped-%d", round)))
		broadcast := declare(t, b, topology.New(fmt.Sprintf("broadcast-%d", round)).Broadcast())
		var declared []*topology.Topology
		for i := range 2 {
			top, err := topology.New(fmt.Sprintf("declared-%d-%d", round, i)).Hold(time.Second).DLQ().Build()
			if err != nil {
				t.Fatal(err)
			}
			declared = append(declared, top)
		}
		type made struct {
			q   topology.Queues[msg]
			r   topology.Reader[msg]
			err error
		}
		calls := []func() made{
			func() made { r, err := grouped.Subscribe(t.Context()); return made{r: r, err: err} },
			func() made { r, err := grouped.Subscribe(t.Context()); return made{r: r, err: err} },
			func() made { r, err := broadcast.Subscribe(t.Context()); return made{r: r, err: err} },
			func() made { q, err := b.Declare(t.Context(), declared[0]); return made{q: q, err: err} },
			func() made { q, err := b.Declare(t.Context(), declared[1]); return made{q: q, err: err} },
		}
		underWay := testbroker.FirstRequest(c, key)
		results, err := testbroker.RaceClose(underWay, calls, func() error { return b.Close(context.Background()) })
		if err != nil {
			t.Fatalf("round %d: the backend's Close racing Declares and Subscribes = %v, want nil", round, err)
		}
		for _, m := range results {
			switch {
			case m.err != nil:
				if !errors.Is(m.err, topology.ErrClosed) {
					t.Fatalf("round %d: a Declare or Subscribe racing the backend's Close = %v, want nil or topology.ErrClosed", round, m.err)
				}
			case m.r != nil:
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				_, err := m.r.Receive(ctx, make([]topology.Letter[msg], 1))
				cancel()
				if !errors.Is(err, topology.ErrClosed) {
					t.Fatalf("round %d: Receive of a reader made while the backend closed = %v, want topology.ErrClosed", round, err)
				}
				topologytest.MustClose(t, "a reader made while the backend closed", m.r.Close)
			default:
				if err := m.q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 1}}); !errors.Is(err, topology.ErrClosed) {
					t.Fatalf("round %d: Publish on queues declared while the backend closed = %v, want topology.ErrClosed", round, err)
				}
			}
		}
	}
}
