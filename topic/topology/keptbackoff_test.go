package topology_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// roomyDLQ refuses every DeadLetter for room (ErrFull) except as many as
// room allows, and records when each was tried and whether it was taken.
type roomyDLQ struct {
	topology.Queues[int]
	room atomic.Int64

	mu    sync.Mutex
	tries []dlqTry
}

// dlqTry is one DeadLetter: when, and whether the DLQ took it.
type dlqTry struct {
	at    time.Time
	taken bool
}

func (q *roomyDLQ) DeadLetter(ctx context.Context, l topology.Letter[int]) error {
	taken := q.room.Add(-1) >= 0
	if !taken {
		q.room.Add(1)
	}
	q.mu.Lock()
	q.tries = append(q.tries, dlqTry{at: time.Now(), taken: taken})
	q.mu.Unlock()
	if !taken {
		return fmt.Errorf("dlq: %w", topology.ErrFull)
	}
	return q.Queues.DeadLetter(ctx, l)
}

func (q *roomyDLQ) triedSoFar() []dlqTry {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.tries)
}

// Guarantee: letters a full queue refused are tried again after 100ms,
// then twice as long each time up to 10s, then every 10s (a queue full
// for long is not hammered, nor left waiting longer than 10s once it
// has room); an attempt that hands some of them off before the queue
// refuses again brings the next attempt back to 100ms (room came and
// went: more is likely soon).
func TestLettersKeptForRoomAreTriedAgainWithABackoffThatRoomResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, mq := declareMemory(t, build(t, topology.New("kept").DLQ()))
		q := &roomyDLQ{Queues: mq}
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		for v := 1; v <= 2; v++ { // taken together, both kept
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		_, p := startPipeline(t, q, func(context.Context, *message.Message[int]) (int, error) {
			return 0, topology.Reject(errors.New("malformed"))
		})
		time.Sleep(5 * time.Minute) // fake time: the DLQ stays full
		synctest.Wait()
		tries := q.triedSoFar()
		if len(tries) < 30 {
			t.Fatalf("the dead letters were tried %d times in 5 minutes, want them tried every 10s at most", len(tries))
		}
		at := make([]time.Time, len(tries))
		for i := range tries {
			at[i] = tries[i].at
		}
		backsOffToTenSeconds(t, at)
		q.room.Store(1) // room for one letter, then full again
		time.Sleep(30 * time.Second)
		synctest.Wait()
		tries = q.triedSoFar()
		took := slices.IndexFunc(tries, func(tr dlqTry) bool { return tr.taken })
		if took < 0 || took+2 >= len(tries) || tries[took+1].taken {
			t.Fatalf("%d attempts, the first taken at %d, want it followed by the second letter refused and another attempt", len(tries), took)
		}
		if got := tries[took+2].at.Sub(tries[took+1].at); got != 100*time.Millisecond {
			t.Fatalf("the attempt after one that handed a letter off came %v after it, want 100ms", got)
		}
		q.room.Store(1)
		time.Sleep(15 * time.Second) // the backoff grew again meanwhile
		synctest.Wait()
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := dlqValues(t, mq); !slices.Equal(got, []int{1, 2}) {
			t.Fatalf("the DLQ holds %v, want [1 2]", got)
		}
	})
}

// backsOffToTenSeconds checks that each of the attempts tried came 100ms
// after the one before, then twice as long each time up to 10s.
func backsOffToTenSeconds(t *testing.T, tried []time.Time) {
	t.Helper()
	gap := 100 * time.Millisecond
	for i := 1; i < len(tried); i++ {
		if got := tried[i].Sub(tried[i-1]); got != gap {
			t.Fatalf("attempt %d came %v after the one before, want %v", i+1, got, gap)
		}
		gap = min(2*gap, 10*time.Second)
	}
}
