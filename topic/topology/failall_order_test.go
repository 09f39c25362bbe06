package topology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// slowDead delays the dead-lettering of value 4 until value 5 has been
// published and taken by the source, as a networked DLQ's latency lets a
// later message of the key arrive while earlier ones are dead-lettered.
type slowDead struct {
	topology.Queues[int]
	src  func() *topology.Source[int]
	dead func() int
}

func (q slowDead) DeadLetter(ctx context.Context, l topology.Letter[int]) error {
	if l.Value == 4 {
		_ = q.Queues.Publish(ctx, topology.Letter[int]{Value: 5, Key: "A"})
		// Until 5 is either held back behind 4 or already dead.
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			if st := q.src().Stats(); st.Received == 5 && (st.HeldBack == 1 || q.dead() == 2) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	return q.Queues.DeadLetter(ctx, l)
}

// Guarantee: under FailAll, the messages of a poisoned key reach the DLQ
// in publish order, those held back when it was poisoned and those that
// arrive while they are being dead-lettered alike.
func TestFailAllDeadLettersInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(t.Context())
		top, err := topology.New("ledger").Sequenced(topology.FailAll).DLQ().Build()
		if err != nil {
			t.Fatal(err)
		}
		mq, err := m.Declare(t.Context(), top)
		if err != nil {
			t.Fatal(err)
		}
		var src *topology.Source[int]
		q := slowDead{Queues: mq, src: func() *topology.Source[int] { return src },
			dead: func() int { return m.Queued("ledger-dlq", "") }}
		src, err = topology.NewSource(topology.SourceOptions[int]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pipeline.New(pipeline.Options[int, int]{
			Name:     "ledger",
			Logger:   slog.New(slog.DiscardHandler),
			Producer: producer.Options[int]{Source: src},
			Processors: processor.Options[int, int]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				if m.Data == 3 {
					// 4 waits behind 3.
					for end := time.Now().Add(time.Minute); src.Stats().HeldBack < 1 && time.Now().Before(end); {
						time.Sleep(time.Millisecond)
					}
					return 0, topology.Reject(errors.New("overdrawn"))
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
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{Key: func(int) string { return "A" }})
		for v := 1; v <= 4; v++ {
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		for end := time.Now().Add(time.Minute); src.Stats().DeadLettered < 3; {
			if time.Now().After(end) {
				t.Fatalf("stats %+v after a minute, want 3 dead letters", src.Stats())
			}
			time.Sleep(time.Millisecond)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		r, err := mq.SubscribeDead(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(t.Context())
		if got := queuedValues(r); fmt.Sprint(got) != "[3 4 5]" {
			t.Errorf("DLQ holds %v, want [3 4 5]", got)
		}
	})
}
