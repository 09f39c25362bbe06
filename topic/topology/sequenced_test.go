package topology_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: on a sequenced topology, a message whose failure wraps
// acker.ErrShutdown while its own pipeline runs (a tracked sink's
// downstream pipeline was stopping and nacked it unhandled) is delivered
// again, still ahead of the later messages of its key, and the key moves
// on: it is not kept back until the source closes.
func TestInterruptedElsewhereIsDeliveredAgainAndItsKeyMovesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := declareLedger(t)
		var mu sync.Mutex
		var handled []int
		src, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) {
			mu.Lock()
			handled = append(handled, m.Data)
			first := len(handled) == 1
			mu.Unlock()
			if first {
				// What a tracked sink fails a message with when the
				// downstream handler was interrupted by its pipeline's
				// shutdown.
				return 0, &sink.OutcomeError{Topic: "audit", Result: topic.Result{
					Outcome: topic.Nacked, Reason: acker.WrapShutdown(context.Canceled)}}
			}
			return m.Data, nil
		})
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{Key: func(int) string { return "A" }})
		for v := 1; v <= 2; v++ {
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		handledSoFar := func() []int {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(handled)
		}
		wait.Within(t, time.Minute, "1, 1 again and then 2 handled", func() bool { return len(handledSoFar()) == 3 },
			func() string { return fmt.Sprintf("handled %v, stats %+v", handledSoFar(), src.Stats()) })
		if got := handledSoFar(); !slices.Equal(got, []int{1, 1, 2}) {
			t.Errorf("handled %v, want [1 1 2]", got)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := src.Stats(); st.Acked != 2 || st.Requeued != 1 || st.HeldBack != 0 {
			t.Errorf("stats %+v, want 2 acked, 1 requeued, none held back", st)
		}
	})
}
