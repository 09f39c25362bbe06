package kafkatopic_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/readertest"
)

// Guarantee: a pipeline reading a Kafka topic through topic/source, as a
// balanced member or as a broadcast subscriber, has its stage degraded
// while the cluster cannot be reached, with the client's error as
// LastError, and running again once the cluster answers, within the same
// run (no restart); every message published before and after the
// outage is handled. How long each change takes is logged, not bounded
// (docs/testing.md).
func TestTopicSourceIsDegradedWhileTheClusterIsOutOfReach(t *testing.T) {
	for name, mode := range readertest.Modes() {
		t.Run(name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			o := testOptions[int](c, topic.IntCodec{})
			o.Partitions = 2
			o.Key = func(v int) []byte { return []byte(fmt.Sprint(v)) }
			b := newBackend(t, o)
			h := newTopic(t, b, "outage", topic.Options{Mode: topic.Mixed})
			r := readertest.Start(t, "outage", h, mode, slog.New(slog.DiscardHandler))
			status, state := r.Status, r.String
			const n = 20
			for v := range n / 2 {
				if err := h.Publish(ctxT(t), v); err != nil {
					t.Fatal(err)
				}
			}
			wait.Within(t, patience, "the messages published before the outage", func() bool {
				return r.Handled() == n/2 && status().State == producer.StateRunning
			}, state)

			down := time.Now()
			var st producer.StageStatus
			testbroker.OutOfReach(t, c, "the stage degraded", func() bool {
				st = status()
				return st.State == producer.StateDegraded
			}, state)
			t.Logf("degraded %v after the cluster went out of reach: %v", st.Since.Sub(down).Round(time.Millisecond), st.LastError)
			if st.LastError == nil || st.Restarts != 0 {
				t.Fatalf("status %+v, want degraded with an error, in the first run", st)
			}

			back := time.Now()
			wait.Within(t, patience, "the stage running again", func() bool { return status().State == producer.StateRunning }, state)
			st = status()
			t.Logf("running %v after the cluster answered again", st.Since.Sub(back).Round(time.Millisecond))
			if st.Restarts != 0 {
				t.Fatalf("status %+v, want the first run still", st)
			}
			for v := n / 2; v < n; v++ {
				if err := h.Publish(ctxT(t), v); err != nil {
					t.Fatal(err)
				}
			}
			wait.Within(t, patience, "every message handled", func() bool { return r.Handled() == n }, state)
		})
	}
}
