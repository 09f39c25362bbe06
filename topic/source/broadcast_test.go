package source_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/topic/source"
)

const auditDoc = `
topics:
  audit:
    policies:
      broadcast:
        queue_capacity: 1024
        on_lag: disconnect
        ack_mode: all
      ack_propagation:
        mode: auto
        timeout: 30s
`

var auditWiring = config.Wiring{Pipelines: []config.Pipeline{
	{Name: "a", Publishes: []config.Publish{{Topic: "audit"}}},
	{Name: "b", Subscribes: []config.Subscribe{{Topic: "audit", Mode: config.Broadcast}}},
	{Name: "c", Subscribes: []config.Subscribe{{Topic: "audit", Mode: config.Broadcast}}},
}}

// wire loads auditDoc and starts B and C (C's handler is given), then A.
func wire(t *testing.T, n int, bGot, cGot *counter, c processor.Handler[int, int]) (*acker.Recorder, *topic.Handle[int]) {
	t.Helper()
	broker := topic.NewBroker[int]()
	t.Cleanup(broker.Close)
	w, err := config.Load([]byte(auditDoc), auditWiring, broker)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"b", "c"} {
		sub := w.Subscriptions(name)[0]
		src, err := source.New(source.Options[int]{Topic: sub.Binding.Handle, Mode: sub.Mode})
		if err != nil {
			t.Fatal(err)
		}
		h := c
		if name == "b" {
			h = func(_ context.Context, m *message.Message[int]) (int, error) {
				bGot.add(m.Data, 0)
				return m.Data, nil
			}
		}
		downstream(t, name, src, 1, h)
	}
	pub, ok := w.Publisher("a", "audit")
	if !ok {
		t.Fatal("a does not publish into audit")
	}
	rec := acker.NewRecorder(false)
	upstream(t, "a", n, rec, pub)
	return rec, pub.Handle
}

// Broadcast with ack_mode all: A's source sees a message acked only after
// both B and C handled it.
func TestBroadcastAckAllWaitsForEverySubscriber(t *testing.T) {
	const n = 100
	bGot, cGot := newCounter(), newCounter()
	g := newGate()
	defer g.open()
	rec, h := wire(t, n, bGot, cGot, func(ctx context.Context, m *message.Message[int]) (int, error) {
		if err := g.wait(ctx); err != nil {
			return 0, err
		}
		cGot.add(m.Data, 0)
		return m.Data, nil
	})
	if h.Options().Mode != topic.BroadcastOnly {
		t.Fatalf("audit inferred %s", h.Options().Mode)
	}
	wait.For(t, "B to handle everything", func() bool { return bGot.count() == n })
	if rec.Total() != 0 {
		t.Fatalf("A's source got %d outcomes while C still holds every message", rec.Total())
	}
	g.open()
	wait.For(t, "A's outcomes", func() bool { return rec.Total() == n })
	if rec.FailedCount() != 0 || cGot.count() != n {
		t.Fatalf("failed %d, C handled %d", rec.FailedCount(), cGot.count())
	}
}

// Broadcast with ack_mode all: when C fails a message that B acked, A's
// source sees it failed with C's reason.
func TestBroadcastAckAllFailureInOneSubscriber(t *testing.T) {
	const n = 60
	bGot, cGot := newCounter(), newCounter()
	rec, _ := wire(t, n, bGot, cGot, func(_ context.Context, m *message.Message[int]) (int, error) {
		cGot.add(m.Data, 0)
		if m.Data == 17 {
			return 0, errBad
		}
		return m.Data, nil
	})
	wait.For(t, "A's outcomes", func() bool { return rec.Total() == n })
	f := rec.Failed()
	if len(f) != 1 || f[0].ID != 17 {
		t.Fatalf("failed outcomes %v, want only 17", f)
	}
	if !errors.Is(f[0].Err, errBad) || f[0].Err.Error() != "topic audit: downstream nacked: bad record" {
		t.Fatalf("A saw %q, want C's reason", f[0].Err)
	}
	if bGot.count() != n {
		t.Fatalf("B handled %d of %d", bGot.count(), n)
	}
}

// lagRig publishes n values into a broadcast topic of capacity 4 while the
// downstream pipeline's handler is held, so that its subscriber lags.
func lagRig(t *testing.T, onLag topic.OnLag, n int, log *slog.Logger) (*source.Source[int], *topic.Handle[int], *gate, *counter) {
	t.Helper()
	h := newTopic(t, "t", topic.Options{Mode: topic.BroadcastOnly, Broadcast: topic.BroadcastPolicy{Capacity: 4, OnLag: onLag}})
	src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Broadcast(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate()
	got := newCounter()
	run(t, pipeline.Options[int, int]{
		Name:     "slow",
		Producer: producer.Options[int]{Source: src, Flow: producer.Flow{Initial: 2, Threshold: 1, Refill: 1}},
		Processors: processor.Options[int, int]{Concurrency: 1, MaxDemand: 1, Handle: func(ctx context.Context, m *message.Message[int]) (int, error) {
			if err := g.wait(ctx); err != nil {
				return 0, err
			}
			got.add(m.Data, 0)
			return m.Data, nil
		}},
	})
	for i := range n {
		if err := h.Publish(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	return src, h, g, got
}

// A lagging broadcast subscriber (on_lag drop_oldest) has its lag counted:
// every published message is either received or reported missed, and the
// source's count matches the topic's.
func TestLagDropOldestCounted(t *testing.T) {
	const n = 500
	logs := &logCounter{}
	src, h, g, got := lagRig(t, topic.DropOldest, n, slog.New(logs))
	g.open()
	wait.For(t, "every message received or missed", func() bool {
		st := src.Stats()
		return st.Received+st.Missed == n
	})
	st := src.Stats()
	if st.LagNotices == 0 || st.Missed == 0 {
		t.Fatalf("no lag counted: %+v", st)
	}
	if ts := h.Stats(); ts.Lagged != st.Missed {
		t.Fatalf("source counted %d missed, topic %d", st.Missed, ts.Lagged)
	}
	wait.For(t, "the received messages to be handled", func() bool { return uint64(got.count()) == st.Received })
	if st.Resubscribes != 0 {
		t.Fatalf("drop_oldest resubscribed: %+v", st)
	}
	if c, missed := logs.lagRecords(); c != int(st.LagNotices) || missed != st.Missed {
		t.Fatalf("logged %d lag warnings for %d missed, want %d for %d", c, missed, st.LagNotices, st.Missed)
	}
	if d := logs.disconnects(); d != 0 {
		t.Fatalf("%d lag warnings under drop_oldest say the subscription was disconnected", d)
	}
}

// Guarantee: a broadcast subscriber disconnected for lagging (on_lag
// disconnect) gets its lag counted, and the source subscribes again: once
// Stats counts as many resubscribes as lag notices, the new subscription is
// in place, and every message published from then on is received (here one
// at a time, so that the new subscription never falls the ring's capacity
// behind in its turn). The source lets go of the subscription it replaced.
//
// The lag is made without a race: nothing reads the subscription New made
// before the pipeline starts, so the fifth value published overwrites one
// it has not read and the topic disconnects it, and the sixth reaches no
// subscriber. The source then resubscribes once the pipeline starts, after
// the last of those values, so the new subscription holds none of them.
func TestLagDisconnectResubscribes(t *testing.T) {
	const capacity = 4
	h := newTopic(t, "t", topic.Options{Mode: topic.BroadcastOnly,
		Broadcast: topic.BroadcastPolicy{Capacity: capacity, OnLag: topic.Disconnect}})
	logs := &logCounter{}
	src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Broadcast(), Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range capacity + 2 {
		if err := h.Publish(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	if ts := h.Stats(); ts.BroadcastSubscribers != 0 || ts.Lagged != capacity {
		t.Fatalf("topic stats %+v, want the unread subscription disconnected, %d missed", ts, capacity)
	}
	got := newCounter()
	run(t, pipeline.Options[int, int]{
		Name:     "lagged",
		Producer: producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			got.add(m.Data, 0)
			return m.Data, nil
		}},
	})
	wait.For(t, "the source to subscribe again", func() bool { return src.Stats().Resubscribes >= 1 })
	st := src.Stats()
	if st.LagNotices != 1 || st.Missed != capacity || st.Resubscribes != 1 || st.Subscriptions != 2 || st.Received != 0 {
		t.Fatalf("stats after the disconnect: %+v, want one notice of %d missed, one resubscribe, nothing received", st, capacity)
	}
	if d := logs.disconnects(); d != 1 {
		t.Fatalf("%d lag warnings say the subscription was disconnected, want 1", d)
	}
	if w := logs.warnings(); w != 1 {
		t.Fatalf("%d WARN lines for one disconnect and its resubscribe, want 1 (the lag warning, which says disconnected)", w)
	}
	if ts := h.Stats(); ts.BroadcastSubscribers != 1 {
		t.Fatalf("topic stats %+v once the source counted its resubscribe, want its new subscription connected", ts)
	}
	for i := range 10 {
		if err := h.Publish(context.Background(), 1000+i); err != nil {
			t.Fatal(err)
		}
		wait.For(t, "a message published after the resubscribe", func() bool {
			seen, _ := got.snapshot()
			return seen[1000+i] == 1
		})
	}
	if seen, _ := got.snapshot(); len(seen) != 10 {
		t.Fatalf("handled %v, want only the 10 values published after the resubscribe", seen)
	}
	if st := src.Stats(); st.LagNotices != 1 || st.Resubscribes != 1 {
		t.Fatalf("stats %+v, want no further disconnect", st)
	}
	wait.For(t, "the replaced subscription to be let go", func() bool { return src.HeldSubscriptions() == 1 })
}

// logCounter is a slog.Handler that counts the source's lines at WARN
// and above and its lag warnings, sums the missed counts those report,
// and counts those that report a disconnect.
type logCounter struct {
	mu           sync.Mutex
	warns        int
	lags         int
	missed       uint64
	disconnected int
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCounter) WithGroup(string) slog.Handler            { return l }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.Level >= slog.LevelWarn {
		l.warns++
	}
	if r.Level != slog.LevelWarn || r.Message != "topic subscriber lagged: messages missed" {
		return nil
	}
	l.lags++
	r.Attrs(func(a slog.Attr) bool {
		switch {
		case a.Key == "missed":
			l.missed += a.Value.Uint64()
		case a.Key == "disconnected" && a.Value.Bool():
			l.disconnected++
		}
		return true
	})
	return nil
}

func (l *logCounter) lagRecords() (int, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lags, l.missed
}

func (l *logCounter) warnings() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.warns
}

func (l *logCounter) disconnects() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.disconnected
}
