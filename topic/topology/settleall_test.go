package topology_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// refusingHandOffs refuses every Hold, Requeue and DeadLetter with an
// error that is not ErrFull (a broker refusing the topic), and counts the
// letters its readers, main and dead, received and settled.
type refusingHandOffs struct {
	topology.Queues[int]

	mu                sync.Mutex
	received, settled int
}

var errTopicRefused = errors.New("topic refused")

func (*refusingHandOffs) Hold(context.Context, int, topology.Letter[int]) error {
	return errTopicRefused
}

func (*refusingHandOffs) Requeue(context.Context, topology.Letter[int]) error {
	return errTopicRefused
}

func (*refusingHandOffs) DeadLetter(context.Context, topology.Letter[int]) error {
	return errTopicRefused
}

func (q *refusingHandOffs) Subscribe(ctx context.Context) (topology.Reader[int], error) {
	r, err := q.Queues.Subscribe(ctx)
	return &settleCountingReader{Reader: r, q: q}, err
}

func (q *refusingHandOffs) SubscribeDead(ctx context.Context) (topology.Reader[int], error) {
	r, err := q.Queues.SubscribeDead(ctx)
	return &settleCountingReader{Reader: r, q: q}, err
}

// counts returns the letters received and settled so far.
func (q *refusingHandOffs) counts() (received, settled int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.received, q.settled
}

type settleCountingReader struct {
	topology.Reader[int]
	q *refusingHandOffs
}

func (r *settleCountingReader) Receive(ctx context.Context, dst []topology.Letter[int]) (int, error) {
	n, err := r.Reader.Receive(ctx, dst)
	r.q.mu.Lock()
	r.q.received += n
	r.q.mu.Unlock()
	return n, err
}

func (r *settleCountingReader) Settle(ctx context.Context, l *topology.Letter[int]) error {
	r.q.mu.Lock()
	r.q.settled++
	r.q.mu.Unlock()
	return r.Reader.Settle(ctx, l)
}

// Guarantee: a letter whose hold, requeue, dead-lettering or putting
// back on the DLQ the backend fails (an error other than ErrFull) is not
// settled as it is: the source keeps it, unsettled, and Close gives it
// back to the backend (Queues.Return), so that the next consumer receives
// it; a dead letter a dead source's handler rejects is settled on the
// reader it came from, as every letter whose outcome is carried out is.
func TestALetterWhoseHandOffFailsIsGivenBackAtCloseAndARejectedDeadLetterSettled(t *testing.T) {
	retry := func(context.Context, *message.Message[int]) (int, error) {
		return 0, topology.Retry(errors.New("gateway down"))
	}
	reject := func(context.Context, *message.Message[int]) (int, error) {
		return 0, topology.Reject(errors.New("malformed"))
	}
	fail := func(context.Context, *message.Message[int]) (int, error) {
		return 0, errors.New("still failing")
	}
	for _, c := range []struct {
		name    string
		b       *topology.Builder
		dead    bool
		handle  func(context.Context, *message.Message[int]) (int, error)
		settled int // 0: kept, then given back
	}{
		{"hold refused", topology.New("held").Hold(time.Second), false, retry, 0},
		{"requeue refused", topology.New("requeued"), false, retry, 0},
		{"dead-letter refused", topology.New("dead").DLQ(), false, reject, 0},
		{"put back refused", topology.New("dlq-back").DLQ(), true, fail, 0},
		{"dead letter rejected", topology.New("dlq-read").DLQ(), true, reject, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, mq := declareMemory(t, build(t, c.b))
				q := &refusingHandOffs{Queues: mq}
				opts := topology.SourceOptions[int]{Queues: q, Logger: slog.New(slog.DiscardHandler)}
				newSource := topology.NewSource[int]
				subscribe := mq.Subscribe
				if c.dead {
					newSource = topology.NewDeadSource[int]
					subscribe = mq.SubscribeDead
					err := mq.DeadLetter(t.Context(), topology.Letter[int]{Value: 1, Death: &topology.Death{Reason: topology.ReasonRejected, Topic: mq.Topology().Name()}})
					if err != nil {
						t.Fatal(err)
					}
				} else if err := mq.Publish(t.Context(), topology.Letter[int]{Value: 1}); err != nil {
					t.Fatal(err)
				}
				src, err := newSource(opts)
				if err != nil {
					t.Fatal(err)
				}
				p := startPipelineOf(t, mq.Topology().Name(), src, c.handle)
				time.Sleep(time.Minute) // fake time: the source tries the hand-off again, in vain
				synctest.Wait()
				if kept, want := src.Stats().HandOffKept, 1-c.settled; kept != want {
					t.Errorf("the source keeps %d letters whose hand-off failed, want %d", kept, want)
				}
				if err := p.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
				if received, settled := q.counts(); received != 1 || settled != c.settled {
					t.Fatalf("the reader received %d letters and settled %d, want 1 and %d", received, settled, c.settled)
				}
				if c.settled == 1 {
					return
				}
				rd, err := subscribe(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				defer rd.Close(context.Background())
				if got := queuedValues(rd); len(got) != 1 || got[0] != 1 {
					t.Fatalf("the next consumer receives %v, want [1]: the letter kept, given back at Close", got)
				}
			})
		})
	}
}
