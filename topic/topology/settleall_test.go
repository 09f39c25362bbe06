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

// Guarantee: a letter whose hold, requeue or dead-lettering the backend
// refuses (an error other than ErrFull), and a dead letter a dead
// source's handler rejects, is settled on the reader it came from, as
// every letter whose outcome is carried out is: a durable backend's
// reader decides its fate (delivered again, or committed past) and
// closes with no letter out, rather than one waiting for a settling that
// never comes.
func TestALetterIsSettledWhenItsHandOffIsRefusedOrItsDeadLetterRejected(t *testing.T) {
	retry := func(context.Context, *message.Message[int]) (int, error) {
		return 0, topology.Retry(errors.New("gateway down"))
	}
	reject := func(context.Context, *message.Message[int]) (int, error) {
		return 0, topology.Reject(errors.New("malformed"))
	}
	for _, c := range []struct {
		name   string
		b      *topology.Builder
		dead   bool
		handle func(context.Context, *message.Message[int]) (int, error)
	}{
		{"hold refused", topology.New("held").Hold(time.Second), false, retry},
		{"requeue refused", topology.New("requeued"), false, retry},
		{"dead-letter refused", topology.New("dead").DLQ(), false, reject},
		{"dead letter rejected", topology.New("dlq-read").DLQ(), true, reject},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, mq := declareMemory(t, build(t, c.b))
				q := &refusingHandOffs{Queues: mq}
				opts := topology.SourceOptions[int]{Queues: q, Logger: slog.New(slog.DiscardHandler)}
				newSource := topology.NewSource[int]
				if c.dead {
					newSource = topology.NewDeadSource[int]
					err := mq.DeadLetter(t.Context(), topology.Letter[int]{Value: 1, Death: &topology.Death{Reason: topology.ReasonRejected, Topic: "dlq-read"}})
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
				synctest.Wait()
				if err := p.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
				if received, settled := q.counts(); received != 1 || settled != 1 {
					t.Fatalf("the reader received %d letters and settled %d, want 1 and 1", received, settled)
				}
			})
		})
	}
}
