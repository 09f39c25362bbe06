package topology_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// handOffLedger wraps queues to record, per message, each hand-off the
// backend took (Hold, DeadLetter) and each Settle of its readers, in
// the order they happened. It fails the first failures dead-letterings
// of message refused, as a DLQ the broker refuses for a while does.
type handOffLedger struct {
	topology.Queues[int]
	refused, failures int
	mu                sync.Mutex
	events            map[int][]string
	failed            int // the dead-letterings of refused failed so far
}

func (q *handOffLedger) record(v int, what string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.events[v] = append(q.events[v], what)
}

func (q *handOffLedger) of(v int) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return fmt.Sprint(q.events[v])
}

func (q *handOffLedger) Hold(ctx context.Context, i int, l topology.Letter[int]) error {
	err := q.Queues.Hold(ctx, i, l)
	if err == nil {
		q.record(l.Value, "held")
	}
	return err
}

func (q *handOffLedger) DeadLetter(ctx context.Context, l topology.Letter[int]) error {
	if l.Value == q.refused {
		q.mu.Lock()
		fail := q.failed < q.failures
		if fail {
			q.failed++
		}
		q.mu.Unlock()
		if fail {
			return errors.New("DLQ topic not authorized")
		}
	}
	err := q.Queues.DeadLetter(ctx, l)
	if err == nil {
		q.record(l.Value, "dead-lettered")
	}
	return err
}

func (q *handOffLedger) Subscribe(ctx context.Context) (topology.Reader[int], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	return ledgerReader{r, q}, nil
}

type ledgerReader struct {
	topology.Reader[int]
	q *handOffLedger
}

func (r ledgerReader) Settle(ctx context.Context, l *topology.Letter[int]) error {
	r.q.record(l.Value, "settled")
	return r.Reader.Settle(ctx, l)
}

// Guarantee: a letter that fails is settled on its reader (a durable
// backend commits it then) only once the backend took its hand-off: a
// retry once its hold queue holds it, a deferral likewise, a rejection
// once the DLQ holds it, so that a crash in between delivers it again
// rather than lose it. A letter whose dead-lettering the backend fails,
// again and again, is kept by the source and handed off again until the
// DLQ takes it, without its handler running again, and settled then,
// counted once in HandOffFailed and DeadLetterFailed: every letter is
// settled once per delivery.
func TestAFailedLetterIsSettledOnlyOnceTheBackendTookItsHandOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, mq := declareMemory(t, build(t, topology.New("payments").Hold(time.Second).DLQ()))
		const failures = 5
		q := &handOffLedger{Queues: mq, refused: 4, failures: failures, events: map[int][]string{}}
		var mu sync.Mutex
		tried := map[int]int{}
		src, _ := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) {
			mu.Lock()
			tried[m.Data]++
			first := tried[m.Data] == 1
			mu.Unlock()
			switch {
			case !first:
				return m.Data, nil
			case m.Data == 1:
				return 0, topology.Retry(errors.New("gateway down"))
			case m.Data == 2:
				return 0, topology.Defer()
			default:
				return 0, topology.Reject(errors.New("unknown account"))
			}
		})
		pub, _ := topology.NewPublisher(topology.Queues[int](q), topology.PublisherOptions[int]{})
		for v := 1; v <= 4; v++ {
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		wait.Within(t, time.Minute, "every message settled", func() bool {
			st := src.Stats()
			return st.Acked == 2 && st.DeadLettered == 2 && st.HandOffKept == 0
		})
		if st := src.Stats(); st.HandOffFailed != 1 || st.DeadLetterFailed != 1 {
			t.Errorf("stats %+v, want the dead-lettering failed %d times counted once in HandOffFailed and DeadLetterFailed", st, failures)
		}
		mu.Lock()
		if n := tried[4]; n != 1 {
			t.Errorf("message 4 handled %d times, want once: its dead-lettering is tried again, not its handling", n)
		}
		mu.Unlock()
		for v, want := range map[int]string{
			1: "[held settled settled]",
			2: "[held settled settled]",
			3: "[dead-lettered settled]",
			4: "[dead-lettered settled]",
		} {
			if got := q.of(v); got != want {
				t.Errorf("message %d: %s, want %s (each hand-off before its settling, each delivery settled once)", v, got, want)
			}
		}
	})
}
