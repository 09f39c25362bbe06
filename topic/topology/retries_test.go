package topology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// negativeRetries stands for a third-party backend that reports a
// negative retry count on every letter it delivers for the first time
// (no failure recorded yet), and records the hold queue index and the
// retry count of every Hold.
type negativeRetries struct {
	topology.Queues[int]
	mu    sync.Mutex
	holds map[int][2]int // value → {hold index, retries}
}

func (q *negativeRetries) Subscribe(ctx context.Context) (topology.Reader[int], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	return negativeReader{r}, nil
}

func (q *negativeRetries) Hold(ctx context.Context, i int, l topology.Letter[int]) error {
	q.mu.Lock()
	q.holds[l.Value] = [2]int{i, l.Retries}
	q.mu.Unlock()
	return q.Queues.Hold(ctx, i, l)
}

func (q *negativeRetries) held(v int) ([2]int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	h, ok := q.holds[v]
	return h, ok
}

type negativeReader struct{ topology.Reader[int] }

func (r negativeReader) Receive(ctx context.Context, dst []topology.Letter[int]) (int, error) {
	n, err := r.Reader.Receive(ctx, dst)
	for i := range dst[:n] {
		if dst[i].FirstFailure.IsZero() {
			dst[i].Retries = -3
		}
	}
	return n, err
}

// negativeRetriesWarning is what a source logs, once, on a letter whose
// retry count is negative.
const negativeRetriesWarning = "a letter with a negative retry count: counted as 0"

// Guarantee: a negative retry count from a backend counts as 0: the
// message is delivered with 0 retries, a retry sends it to the first hold
// queue with 1 retry and a defer to the first hold queue with 0 (never a
// negative hold index), on a plain and on a sequenced topology, and the
// source logs the bad count once, however many letters carry one.
func TestNegativeRetryCountFromABackendCountsAsZero(t *testing.T) {
	for _, b := range []*topology.Builder{
		topology.New("neg").Hold(time.Second).Hold(2 * time.Second).DLQ(),
		topology.New("negseq").Sequenced(topology.Skip).Hold(time.Second).Hold(2 * time.Second).DLQ(),
	} {
		top := build(t, b)
		t.Run(top.Name(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, mq := declareMemory(t, top)
				q := &negativeRetries{Queues: mq, holds: map[int][2]int{}}
				logs := &logtest.Records{}
				var mu sync.Mutex
				tries := map[int][]int{} // value → the Delivery.Retries of each attempt
				_, p := startLoggingPipeline(t, q, slog.New(logs), func(_ context.Context, msg *message.Message[int]) (int, error) {
					d, _ := topology.DeliveryOf(msg)
					mu.Lock()
					tries[msg.Data] = append(tries[msg.Data], d.Retries)
					first := len(tries[msg.Data]) == 1
					mu.Unlock()
					switch {
					case !first:
						return msg.Data, nil
					case msg.Data == 1:
						return 0, topology.Retry(errors.New("flaky"))
					default:
						return 0, topology.Defer()
					}
				})
				var popts topology.PublisherOptions[int]
				if _, seq := top.Sequenced(); seq {
					popts.Key = func(v int) string { return string(rune('A' + v)) }
				}
				pub, err := topology.NewPublisher(q, popts)
				if err != nil {
					t.Fatal(err)
				}
				for v := 1; v <= 2; v++ {
					if err := pub.Publish(t.Context(), v); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(5 * time.Second) // fake time: both holds are over
				synctest.Wait()
				if err := p.Stop(t.Context()); err != nil {
					t.Fatal(err)
				}
				for v, want := range map[int][2]int{1: {0, 1}, 2: {0, 0}} {
					if got, ok := q.held(v); !ok || got != want {
						t.Errorf("message %d held as {index, retries} %v (held: %t), want %v", v, got, ok, want)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				for v, want := range map[int]string{1: "[0 1]", 2: "[0 0]"} {
					if got := fmt.Sprint(tries[v]); got != want {
						t.Errorf("message %d attempted with retries %s, want %s", v, got, want)
					}
				}
				if n := logs.Count(slog.LevelWarn, negativeRetriesWarning); n != 1 {
					t.Errorf("%d warnings %q, want 1", n, negativeRetriesWarning)
				}
			})
		})
	}
}
