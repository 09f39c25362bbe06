package topology_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a source counts its dead letters by their reason
// (Stats.DeadLetteredBy), and the reasons add up to DeadLettered: a
// rejected message under Rejected, one that failed again after MaxRetries
// retries under MaxRetries, one whose last allowed attempt timed out
// under Timeout.
func TestDeadLettersAreCountedByReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := declareMemory(t, build(t, topology.New("orders").Hold(time.Second).DLQ()))
		src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, MaxRetries: 1, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pipeline.New(pipeline.Options[int, int]{
			Name:     "orders",
			Logger:   slog.New(slog.DiscardHandler),
			Producer: producer.Options[int]{Source: src},
			Processors: processor.Options[int, int]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				switch m.Data {
				case 0:
					return 0, topology.Reject(errors.New("malformed"))
				case 1:
					return 0, topology.Retry(errors.New("gateway down"))
				case 2:
					return 0, &topology.TimeoutError{Timeout: time.Second}
				}
				return m.Data, nil
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer p.Stop(context.Background())
		pub, err := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		if err != nil {
			t.Fatal(err)
		}
		for n := range 4 {
			if err := pub.Publish(t.Context(), n); err != nil {
				t.Fatal(err)
			}
		}
		wait.Within(t, time.Minute, "every message settled", func() bool {
			st := src.Stats()
			return st.Acked == 1 && st.DeadLettered == 3
		})
		st := src.Stats()
		if want := (topology.DeadReasons{Rejected: 1, MaxRetries: 1, Timeout: 1}); st.DeadLetteredBy != want {
			t.Fatalf("Stats().DeadLetteredBy = %+v, want %+v (DeadLettered %d)", st.DeadLetteredBy, want, st.DeadLettered)
		}
	})
}
