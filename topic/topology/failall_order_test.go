package topology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
		var src *topology.Source[int]
		q, mq, src, p := startLedger(t, m, 3, func(mq topology.Queues[int]) topology.Queues[int] {
			return slowDead{Queues: mq, src: func() *topology.Source[int] { return src },
				dead: func() int { return m.Queued("ledger-dlq", "") }}
		})
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

// Guarantee: under FailAll, every later message of a poisoned key is
// dead-lettered with the error of the message that poisoned it, whether it
// was held back behind that message or arrived after the key was
// poisoned, so the DLQ says why each message is there.
func TestPoisonedKeyDeadLettersGiveTheFirstFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(t.Context())
		q, _, src, p := startLedger(t, m, 1, nil)
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{Key: func(int) string { return "A" }})
		publishUntilDead := func(dead uint64, vs ...int) {
			t.Helper()
			for _, v := range vs {
				if err := pub.Publish(t.Context(), v); err != nil {
					t.Fatal(err)
				}
			}
			for src.Stats().DeadLettered < dead {
				time.Sleep(time.Millisecond)
			}
		}
		publishUntilDead(2, 1, 2) // 1 poisons the key, 2 was held back behind it
		publishUntilDead(3, 3)    // 3 arrives once the key is poisoned
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		r, err := q.SubscribeDead(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(t.Context())
		buf := make([]topology.Letter[int], 8)
		n, _ := r.TryReceive(t.Context(), buf)
		var got []string
		for _, l := range buf[:n] {
			got = append(got, fmt.Sprintf("%d: %s", l.Value, l.Death.Error))
		}
		const later = `key "A" poisoned by an earlier message: overdrawn`
		if want := []string{"1: overdrawn", "2: " + later, "3: " + later}; !slices.Equal(got, want) {
			t.Errorf("DLQ holds %q, want %q", got, want)
		}
	})
}

// startLedger declares the sequenced FailAll topology "ledger" on m, with
// a DLQ, and starts a pipeline of two processors on a source of its queues,
// as wrap makes them of the declared ones when wrap is not nil. The
// handler rejects value bad ("overdrawn") once a later message of its key
// is held back behind it, and handles the others. It returns the queues
// the source reads, the declared ones, the source and the pipeline.
func startLedger(t *testing.T, m *topology.Memory[int], bad int,
	wrap func(topology.Queues[int]) topology.Queues[int]) (topology.Queues[int], topology.Queues[int], *topology.Source[int], *pipeline.Pipeline[int, int]) {
	t.Helper()
	top, err := topology.New("ledger").Sequenced(topology.FailAll).DLQ().Build()
	if err != nil {
		t.Fatal(err)
	}
	declared, err := m.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	q := declared
	if wrap != nil {
		q = wrap(declared)
	}
	src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:     "ledger",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			if m.Data == bad {
				// The next message of the key waits behind it.
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
	return q, declared, src, p
}
