package source_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

// deferred is a message the test settles itself through its acknowledger.
type deferred struct {
	ack acker.Acknowledger
	id  uint64
}

// An outcome whose failure the pipeline's shutdown caused is nacked on the
// topic, never acked, whatever its disposition says: the tracked upstream
// publish resolves as nacked with a reason wrapping acker.ErrShutdown.
func TestInterruptedOutcomeIsNacked(t *testing.T) {
	for _, d := range []acker.Disposition{acker.DispositionRetry, acker.DispositionDiscard} {
		t.Run(d.String(), func(t *testing.T) {
			h := newTopic(t, "t", auto(topic.Options{}))
			src := newSource(t, h, topic.Balanced("b"))
			got := make(chan deferred, 1)
			run(t, pipeline.Options[int, int]{
				Name:     "b",
				Producer: producer.Options[int]{Source: src},
				Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
					m.Defer()
					ack, id, _ := m.Acknowledger()
					got <- deferred{ack, id}
					return m.Data, nil
				}},
			})
			tp, err := binding(h).Tracked()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(tp.Close)
			results := make(chan topic.Result, 1)
			if err := tp.PublishFunc(context.Background(), 1, func(r topic.Result) { results <- r }); err != nil {
				t.Fatal(err)
			}
			var m deferred
			select {
			case m = <-got:
			case <-time.After(deadline):
				t.Fatal("the message never reached the handler")
			}
			cause := acker.WrapShutdown(fmt.Errorf("store: %w", context.Canceled))
			m.ack.Ack(context.Background(), nil, []acker.Outcome{{ID: m.id, Err: cause, Disposition: d}})
			var r topic.Result
			select {
			case r = <-results:
			case <-time.After(deadline):
				t.Fatal("the tracked publish never resolved")
			}
			if r.Outcome != topic.Nacked || !errors.Is(r.Reason, acker.ErrShutdown) {
				t.Fatalf("upstream publish resolved %v (%v), want nacked with the shutdown as reason", r.Outcome, r.Reason)
			}
			if st := src.Stats(); st.Nacked != 1 || st.Acked != 0 {
				t.Fatalf("source stats %+v, want one nack and no ack", st)
			}
		})
	}
}

// A chain A → topic → B where B's shutdown timeout cuts its handlers
// short, and B's failure hook tries to discard every failure: A's source
// sees each message failed as interrupted and asks for a retry, so none is
// acked or committed as handled.
func TestShutdownOfDownstreamRetriesUpstream(t *testing.T) {
	const n = 3
	h := newTopic(t, "t", auto(topic.Options{}))
	started := make(chan struct{}, n)
	b, err := pipeline.New(pipeline.Options[int, int]{
		Name:            "b",
		ShutdownTimeout: 50 * time.Millisecond,
		Producer:        producer.Options[int]{Source: newSource(t, h, topic.Balanced("b"))},
		Processors: processor.Options[int, int]{
			Concurrency: n, MaxDemand: 1,
			Handle: func(ctx context.Context, m *message.Message[int]) (int, error) {
				started <- struct{}{}
				<-ctx.Done()
				return 0, fmt.Errorf("store %d: %w", m.Data, ctx.Err())
			},
			HandleFailed: func(_ context.Context, failed []*message.Message[int]) {
				for _, m := range failed {
					m.SetDisposition(acker.DispositionDiscard)
				}
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := acker.NewRecorder(false)
	upstream(t, "a", n, rec, binding(h))
	for range n {
		select {
		case <-started:
		case <-time.After(deadline):
			t.Fatal("B's handlers never all started")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := b.Stop(ctx); err != nil && !errors.Is(err, pipeline.ErrShutdownTimeout) {
		t.Fatalf("stopping B: %v", err)
	}
	if err := rec.Wait(ctx, n); err != nil {
		t.Fatal(err)
	}
	if rec.FailedCount() != n {
		t.Fatalf("A's source saw %d of %d messages handled", n-rec.FailedCount(), n)
	}
	for _, o := range rec.Failed() {
		if !acker.Interrupted(o) || o.Disposition != acker.DispositionRetry {
			t.Fatalf("message %d: %v (disposition %v), want interrupted and retried", o.ID, o.Err, o.Disposition)
		}
	}
}

// When the upstream pipeline's own shutdown timeout cuts it short while its
// sink waits (publishes blocked on a full topic, and with ack propagation
// tracked publishes no subscriber settles), the messages left unhandled are
// reported to its source as interrupted retries: none is reported handled
// except, without ack propagation, what was already handed to the topic.
func TestShutdownOfUpstreamRetriesUnsettledPublishes(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    topic.Options
		handled int // successes expected: messages handed over untracked
	}{
		{"untracked", topic.Options{Balanced: topic.BalancedPolicy{Capacity: 1}}, 1},
		{"tracked", auto(topic.Options{Balanced: topic.BalancedPolicy{Capacity: 1}}), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 4
			h := newTopic(t, "t", c.opts)
			// A member that never receives: the group queue fills at one.
			sub, err := h.Subscribe(t.Context(), topic.Balanced("b"), topic.SubscriberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sub.Close)
			s, err := sink.New(sink.Options[int]{Binding: binding(h)})
			if err != nil {
				t.Fatal(err)
			}
			rec := acker.NewRecorder(false)
			a, err := pipeline.New(pipeline.Options[int, int]{
				Name:            "a",
				ShutdownTimeout: 50 * time.Millisecond,
				Drainers:        []pipeline.Drainer{s},
				Producer:        producer.Options[int]{Source: &listSource{n: n, ack: rec}},
				Processors:      processor.Options[int, int]{Concurrency: 2, MaxDemand: 1, Handle: s.Handler()},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Both processors block: one publish fills the queue, the next
			// two wait for room.
			wait.For(t, "the queue to fill", func() bool { return h.Stats().Published >= 1 })
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			if err := a.Stop(ctx); !errors.Is(err, pipeline.ErrShutdownTimeout) {
				t.Fatalf("stopping A: %v, want the drain cut short", err)
			}
			if got := len(rec.Successful()); got != c.handled {
				t.Fatalf("%d messages reported handled, want %d", got, c.handled)
			}
			if rec.FailedCount() == 0 {
				t.Fatal("no message reported failed: the blocked publishes were lost")
			}
			for _, o := range rec.Failed() {
				if !acker.Interrupted(o) || o.Disposition != acker.DispositionRetry {
					t.Fatalf("message %d: %v (disposition %v), want interrupted and retried", o.ID, o.Err, o.Disposition)
				}
			}
		})
	}
}
