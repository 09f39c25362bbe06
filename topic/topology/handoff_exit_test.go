package topology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// misbehavingHolds refuses the first Hold with refusal, as a broker that
// refuses the hold topic (or a full hold queue) would; the next Hold
// panics and the one after ends its goroutine (runtime.Goexit, as
// t.FailNow does); later ones reach the backend.
type misbehavingHolds struct {
	topology.Queues[int]
	refusal error
	calls   *atomic.Int64
}

func (q misbehavingHolds) Hold(ctx context.Context, i int, l topology.Letter[int]) error {
	switch q.calls.Add(1) {
	case 1:
		return q.refusal
	case 2:
		panic("hold backend broke")
	case 3:
		runtime.Goexit()
	}
	return q.Queues.Hold(ctx, i, l)
}

// Guarantee: the source's own attempts to hand a refused retry off again
// (with backoff, whether the backend refused it or a full queue did)
// survive a backend whose Hold panics or ends the goroutine: each counts
// as a failed attempt, logged at error level (the exit with its stack),
// the retry is tried again, and its key moves on once the backend takes
// it, instead of the process crashing or the key (or, for a full queue,
// the whole source) stalling until the consumer stops.
func TestAHandOffThatPanicsOrExitsIsTriedAgain(t *testing.T) {
	for _, refusal := range []error{errors.New("hold topic unavailable"), fmt.Errorf("hold queue: %w", topology.ErrFull)} {
		t.Run(refusal.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log logtest.Records
				_, mq := declareLedger(t)
				calls := new(atomic.Int64)
				q := misbehavingHolds{Queues: mq, refusal: refusal, calls: calls}
				var handled atomic.Int64
				var order []int
				_, p := startLoggingPipeline(t, q, slog.New(&log), func(_ context.Context, m *message.Message[int]) (int, error) {
					order = append(order, m.Data) // one processor: one at a time
					if handled.Add(1) == 1 {
						return 0, topology.Retry(errors.New("gateway down"))
					}
					return m.Data, nil
				})
				publishOneTwoToKeyA(t, mq)
				time.Sleep(time.Minute) // fake time: the backoffs and the hold's second
				synctest.Wait()
				if n := calls.Load(); n != 4 {
					t.Fatalf("Hold called %d times, want 4: refused, panicked, exited, taken", n)
				}
				if got := handled.Load(); got != 3 || !slices.Equal(order, []int{1, 1, 2}) {
					t.Fatalf("handled %v, want [1 1 2]: the retry comes back and its key moves on", order)
				}
				if got := log.Count(slog.LevelError, "a hand-off to the backend ended its goroutine (runtime.Goexit); the letter is tried again"); got != 1 {
					t.Fatalf("%d ERROR lines for the exit, want 1", got)
				}
				if err := p.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
