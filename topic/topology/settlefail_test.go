package topology_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// errPartitionGone is what revokedQueues' readers answer every Settle
// with, as a durable backend's reader does for the letters of a partition
// a rebalance took away.
var errPartitionGone = errors.New("partition revoked before the letter was settled")

// revokedQueues wraps queues so that no letter can be settled.
type revokedQueues[T any] struct{ topology.Queues[T] }

type revokedReader[T any] struct{ topology.Reader[T] }

func (q revokedQueues[T]) Subscribe(ctx context.Context) (topology.Reader[T], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	return revokedReader[T]{r}, nil
}

func (revokedReader[T]) Settle(context.Context, *topology.Letter[T]) error { return errPartitionGone }

// Guarantee: letters whose settling the backend refuses are each counted
// (Stats.SettleFailed), and a burst of them (a partition taken away with
// many letters in flight) costs one WARN line, not one a letter; the
// source's Close logs one more line with the count of those it did not
// log, so no failure goes unsaid.
func TestABurstOfFailedSettlingsIsCountedAndLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const letters = 300
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(t.Context())
		top, _ := topology.New("gone").Build()
		mq, _ := m.Declare(t.Context(), top)
		var lines logtest.Lines
		src, p := startLoggingPipeline(t, revokedQueues[int]{mq}, slog.New(slog.NewTextHandler(&lines, nil)),
			func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil })
		pub, _ := topology.NewPublisher(mq, topology.PublisherOptions[int]{})
		for v := range letters {
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		wait.Within(t, time.Minute, "every letter's settling to fail", func() bool { return src.Stats().SettleFailed == letters })
		if got := lines.Matching("could not settle"); len(got) != 1 || !strings.Contains(got[0], errPartitionGone.Error()) {
			t.Fatalf("%d failed settlings logged %q, want one line with the error", letters, got)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := src.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := lines.Matching("could not settle")
		if len(got) != 2 || !strings.Contains(got[1], logburst.HeldBackKey+"=299") {
			t.Fatalf("after Close: %q, want a second line counting the 299 not logged", got)
		}
		if st := src.Stats(); st.Acked != letters || st.SettleFailed != letters {
			t.Errorf("stats %+v, want %d acked and %d failed settlings", st, letters, letters)
		}
	})
}
