package topologytest

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/internal/readertest"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Outage is how a broker backend's test takes its broker out of reach
// and brings it back, for DegradedWhileAway.
type Outage struct {
	// Away takes the broker out of reach and returns once degraded holds
	// (state describes the pipeline, for a failure message). Required.
	Away func(t *testing.T, degraded func() bool, state func() string)
	// Back brings the broker back; nil when Away did before returning.
	Back func(t *testing.T)
	// PublishAfter publishes m once the broker is back; nil: through the
	// queues (Queues.Publish).
	PublishAfter func(t *testing.T, m Msg)
	// Err, when set, is what the stage's LastError wraps while degraded.
	Err error
}

// DegradedWhileAway checks, on q's backend, that a pipeline reading q
// through a topology source has its stage degraded while the broker is
// out of reach (o.Away), with an error as LastError (wrapping o.Err when
// set), and running again once it is back (o.Back), within the same run
// (no restart); every letter published before and after the outage is
// handled. Each wait is bounded by bound. How long each change takes is
// logged, not bounded.
func DegradedWhileAway(t *testing.T, q topology.Queues[Msg], bound time.Duration, o Outage) {
	t.Helper()
	src, err := topology.NewSource(topology.SourceOptions[Msg]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r := readertest.Run(t, "outage", src, func(m Msg) int { return m.N }, slog.New(slog.DiscardHandler))
	// A broadcast reader reads from the log end as it subscribes: the
	// stage runs once it has.
	wait.Within(t, bound, "the stage running", func() bool { return r.Status().State == producer.StateRunning }, r.String)
	const n = 20
	for v := range n / 2 {
		if err := q.Publish(t.Context(), topology.Letter[Msg]{Value: Msg{N: v}}); err != nil {
			t.Fatal(err)
		}
	}
	wait.Within(t, bound, "the letters published before the outage", func() bool {
		return r.Handled() == n/2 && r.Status().State == producer.StateRunning
	}, r.String)

	down := time.Now()
	var st producer.StageStatus
	o.Away(t, func() bool {
		st = r.Status()
		return st.State == producer.StateDegraded
	}, r.String)
	t.Logf("degraded %v after the broker went out of reach: %v", st.Since.Sub(down).Round(time.Millisecond), st.LastError)
	if st.LastError == nil || (o.Err != nil && !errors.Is(st.LastError, o.Err)) || st.Restarts != 0 {
		t.Fatalf("status %+v, want degraded with an error (%v), in the first run", st, o.Err)
	}

	if o.Back != nil {
		o.Back(t)
	}
	back := time.Now()
	wait.Within(t, bound, "the stage running again", func() bool { return r.Status().State == producer.StateRunning }, r.String)
	st = r.Status()
	t.Logf("running %v after the broker came back", st.Since.Sub(back).Round(time.Millisecond))
	if st.Restarts != 0 {
		t.Fatalf("status %+v, want the first run still", st)
	}
	for v := n / 2; v < n; v++ {
		if o.PublishAfter != nil {
			o.PublishAfter(t, Msg{N: v})
		} else if err := q.Publish(t.Context(), topology.Letter[Msg]{Value: Msg{N: v}}); err != nil {
			t.Fatal(err)
		}
	}
	wait.Within(t, bound, "every letter handled", func() bool { return r.Handled() == n }, r.String)
}
