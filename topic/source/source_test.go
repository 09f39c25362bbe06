package source_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
	"github.com/boulevard-go/boulevard/topic/source"
	"github.com/boulevard-go/boulevard/validate"
)

func newTopic(t *testing.T, name string, opts topic.Options) *topic.Handle[int] {
	t.Helper()
	h, err := topic.NewTopic[int](topic.Name(name), opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func auto(o topic.Options) topic.Options {
	o.AckPropagation.Mode = topic.PropagationAuto
	return o
}

func binding(h *topic.Handle[int]) topic.Binding[int] {
	o := h.Options()
	return topic.Binding[int]{Handle: h, OnFull: o.Balanced.OnFull, AckPropagation: o.AckPropagation}
}

func newSource(t *testing.T, h *topic.Handle[int], mode topic.SubscriptionMode) *source.Source[int] {
	t.Helper()
	src, err := source.New(source.Options[int]{Topic: h, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// upstream starts pipeline A: a list source of n values acknowledged to rec,
// whose processors publish every message into the binding's topic through a
// sink. Its source is guarded, so stopping A waits for the downstream
// outcomes.
func upstream(t *testing.T, name string, n int, rec acker.Acknowledger, b topic.Binding[int]) (*pipeline.Pipeline[int, int], *sink.Sink[int]) {
	t.Helper()
	s, err := sink.New(sink.Options[int]{Binding: b})
	if err != nil {
		t.Fatal(err)
	}
	p := run(t, pipeline.Options[int, int]{
		Name:       name,
		Drainers:   []pipeline.Drainer{s},
		Producer:   producer.Options[int]{Source: &listSource{n: n, ack: rec}},
		Processors: processor.Options[int, int]{Concurrency: 2, Handle: s.Handler()},
	})
	return p, s
}

// downstream starts a pipeline reading src whose handler is h.
func downstream(t *testing.T, name string, src *source.Source[int], concurrency int, h processor.Handler[int, int]) *pipeline.Pipeline[int, int] {
	t.Helper()
	return run(t, pipeline.Options[int, int]{
		Name:       name,
		Producer:   producer.Options[int]{Source: src, Concurrency: concurrency},
		Processors: processor.Options[int, int]{Concurrency: 4, Handle: h},
	})
}

func member(m *message.Message[int]) int {
	md, _ := message.MetadataAs[*source.Metadata](m)
	return md.Member
}

// Options are validated, naming the field and the rule.
func TestOptionsValidate(t *testing.T) {
	_, err := source.New(source.Options[int]{})
	want := "invalid options: source.topic is required; source.mode needs a consumer group (topic.Balanced(group)) or topic.Broadcast()"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	h := newTopic(t, "t", topic.Options{})
	_, err = source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("g"), MaxBatch: -1})
	if !errors.Is(err, validate.ErrInvalid) || err.Error() != "invalid options: source.maxBatch must be ≥ 1" {
		t.Fatalf("got %v", err)
	}
	_, err = source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("g"), MaxBatch: source.MaxBatchLimit + 1})
	if !errors.Is(err, validate.ErrInvalid) || err.Error() != "invalid options: source.maxBatch must be ≤ 65536" {
		t.Fatalf("got %v", err)
	}
	// A subscription the topic refuses is reported by New.
	_, err = source.New(source.Options[int]{Topic: h, Mode: topic.Broadcast()})
	if !errors.Is(err, topic.ErrSubscribeBroadcastNotSupported) {
		t.Fatalf("got %v, want ErrSubscribeBroadcastNotSupported", err)
	}
}

// Guarantee: a zero MaxBatch means the documented default, 64; a set one
// is kept.
func TestMaxBatchDefaultsTo64(t *testing.T) {
	if got := (source.Options[int]{}).WithDefaults().MaxBatch; got != 64 || source.DefaultMaxBatch != 64 {
		t.Fatalf("default MaxBatch %d (DefaultMaxBatch %d), want 64", got, source.DefaultMaxBatch)
	}
	if got := (source.Options[int]{MaxBatch: 5}).WithDefaults().MaxBatch; got != 5 {
		t.Fatalf("MaxBatch 5 became %d", got)
	}
}

// The source takes from its subscription only what its feed was granted:
// with a rate limit that lets one message per hour reach the processors (so
// no refill is due), exactly Flow.Initial messages leave the topic and the
// rest stay queued in it.
func TestPermitWindow(t *testing.T) {
	h := newTopic(t, "t", topic.Options{Balanced: topic.BalancedPolicy{Capacity: 100}})
	src := newSource(t, h, topic.Balanced("g"))
	defer src.Close(context.Background())
	for i := range 60 {
		if err := h.Publish(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	flow := producer.Flow{Initial: 7, Threshold: 3, Refill: 4}
	p := run(t, pipeline.Options[int, int]{
		Name: "w",
		Producer: producer.Options[int]{Source: src, Flow: flow,
			RateLimit: &producer.RateLimit{Allowed: 1, Interval: time.Hour}},
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }},
	})
	wait.For(t, "the first window", func() bool { return src.Stats().Received == 7 })
	// Give an over-eager source every chance to take more.
	for range 50 {
		if r := src.Stats().Received; r != 7 {
			t.Fatalf("received %d messages with 7 permits", r)
		}
		yield()
	}
	// Let the held messages through, so that the pipeline drains at cleanup.
	if err := p.SetRateLimit(nil); err != nil {
		t.Fatal(err)
	}
}

// With ack_propagation auto, pipeline A's source learns a message's outcome
// only after pipeline B acked it on the topic.
func TestAutoPropagationAcksAfterDownstream(t *testing.T) {
	const n = 200
	h := newTopic(t, "t", auto(topic.Options{}))
	g := newGate()
	got := newCounter()
	downstream(t, "b", newSource(t, h, topic.Balanced("b")), 2, func(ctx context.Context, m *message.Message[int]) (int, error) {
		if err := g.wait(ctx); err != nil {
			return 0, err
		}
		got.add(m.Data, member(m))
		return m.Data, nil
	})
	rec := acker.NewRecorder(false)
	_, s := upstream(t, "a", n, rec, binding(h))
	// A has published everything (B holds some and the topic the rest), yet
	// none of A's messages is acknowledged.
	wait.For(t, "A to publish everything", func() bool { return s.Stats().Published == n })
	if rec.Total() != 0 {
		t.Fatalf("A's source got %d outcomes before B acked anything", rec.Total())
	}
	g.open()
	wait.For(t, "A's outcomes", func() bool { return rec.Total() == n })
	if rec.FailedCount() != 0 {
		t.Fatalf("%d outcomes failed: %v", rec.FailedCount(), rec.Failed())
	}
	for id, c := range rec.Counts() {
		if c != 1 {
			t.Fatalf("message %d acknowledged %d times", id, c)
		}
	}
	if got.count() != n {
		t.Fatalf("B handled %d messages, want %d", got.count(), n)
	}
}

var errBad = errors.New("bad record")

// A failure in pipeline B reaches pipeline A's source as a failed outcome
// carrying B's error.
func TestAutoPropagationFailure(t *testing.T) {
	const n = 50
	h := newTopic(t, "t", auto(topic.Options{}))
	downstream(t, "b", newSource(t, h, topic.Balanced("b")), 1, func(_ context.Context, m *message.Message[int]) (int, error) {
		if m.Data%10 == 3 {
			return 0, fmt.Errorf("value %d: %w", m.Data, errBad)
		}
		return m.Data, nil
	})
	rec := acker.NewRecorder(false)
	upstream(t, "a", n, rec, binding(h))
	wait.For(t, "A's outcomes", func() bool { return rec.Total() == n })
	failed := rec.Failed()
	if len(failed) != 5 {
		t.Fatalf("%d failed outcomes, want 5", len(failed))
	}
	for _, o := range failed {
		if o.ID%10 != 3 || !errors.Is(o.Err, errBad) || !errors.Is(o.Err, sink.ErrNacked) {
			t.Fatalf("failed outcome %d: %v; want values ≡3 mod 10 failed with B's error", o.ID, o.Err)
		}
		want := fmt.Sprintf("topic t: downstream nacked: value %d: bad record", o.ID)
		if o.Err.Error() != want {
			t.Fatalf("error %q, want %q", o.Err, want)
		}
	}
}

// With ack propagation disabled, A's messages are acknowledged once handed
// to the topic, whatever B does with them.
func TestDisabledPropagationAcksOnHandOver(t *testing.T) {
	const n = 40
	h := newTopic(t, "t", topic.Options{})
	g := newGate()
	defer g.open()
	downstream(t, "b", newSource(t, h, topic.Balanced("b")), 1, func(ctx context.Context, m *message.Message[int]) (int, error) {
		return m.Data, g.wait(ctx)
	})
	rec := acker.NewRecorder(false)
	_, s := upstream(t, "a", n, rec, binding(h))
	wait.For(t, "A's outcomes while B holds", func() bool { return rec.Total() == n })
	if rec.FailedCount() != 0 || s.Tracked() {
		t.Fatalf("failed %d, tracked %v", rec.FailedCount(), s.Tracked())
	}
}

// A balanced topic spreads the messages over B's producer concurrency: one
// group member per stage, every message handled exactly once, none lost.
func TestBalancedSpread(t *testing.T) {
	const n, members = 2000, 4
	h := newTopic(t, "t", auto(topic.Options{Balanced: topic.BalancedPolicy{Capacity: 64}}))
	src := newSource(t, h, topic.Balanced("b"))
	got := newCounter()
	run(t, pipeline.Options[int, int]{
		Name:     "b",
		Producer: producer.Options[int]{Source: src, Concurrency: members, Flow: producer.Flow{Initial: 4, Threshold: 2, Refill: 2}},
		Processors: processor.Options[int, int]{Concurrency: 4, MaxDemand: 1, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			got.add(m.Data, member(m))
			yield()
			return m.Data, nil
		}},
	})
	rec := acker.NewRecorder(false)
	upstream(t, "a", n, rec, binding(h))
	wait.For(t, "A's outcomes", func() bool { return rec.Total() == n })
	seen, perMember := got.snapshot()
	if len(seen) != n || rec.FailedCount() != 0 {
		t.Fatalf("B handled %d distinct values (failed %d), want %d", len(seen), rec.FailedCount(), n)
	}
	for v, c := range seen {
		if c != 1 {
			t.Fatalf("value %d handled %d times", v, c)
		}
	}
	if len(perMember) != members {
		t.Fatalf("messages went to members %v, want all %d members", perMember, members)
	}
	// The source counts an ack once the topic call returns, which is after
	// the upstream outcome was reported.
	wait.For(t, "the source's ack count", func() bool { return src.Stats().Acked == n })
	if st := src.Stats(); st.Subscriptions != members || st.Received != n {
		t.Fatalf("source stats %+v", st)
	}
	if st := h.Stats(); st.BalancedGroups != 1 {
		t.Fatalf("topic stats %+v, want one group", st)
	}
}

// A broadcast source shares one subscription among its producer stages, so
// each message enters the pipeline once whatever the concurrency.
func TestBroadcastSharedSubscription(t *testing.T) {
	const n = 300
	h := newTopic(t, "t", auto(topic.Options{Mode: topic.BroadcastOnly}))
	src := newSource(t, h, topic.Broadcast())
	got := newCounter()
	downstream(t, "b", src, 3, func(_ context.Context, m *message.Message[int]) (int, error) {
		got.add(m.Data, member(m))
		return m.Data, nil
	})
	rec := acker.NewRecorder(false)
	upstream(t, "a", n, rec, binding(h))
	wait.For(t, "A's outcomes", func() bool { return rec.Total() == n })
	seen, _ := got.snapshot()
	for v := range n {
		if seen[v] != 1 {
			t.Fatalf("value %d handled %d times", v, seen[v])
		}
	}
	if st := src.Stats(); st.Subscriptions != 1 {
		t.Fatalf("source made %d subscriptions, want 1", st.Subscriptions)
	}
	if st := h.Stats(); st.BroadcastSubscribers != 1 {
		t.Fatalf("topic stats %+v", st)
	}
}

// Batches published with PublishBatch are deferred and acknowledged upstream
// together once every message of the batch resolved: one Ack call per batch.
func TestBatchPublish(t *testing.T) {
	const n, size = 100, 10
	h := newTopic(t, "t", auto(topic.Options{}))
	downstream(t, "b", newSource(t, h, topic.Balanced("b")), 1, func(_ context.Context, m *message.Message[int]) (int, error) {
		if m.Data == 42 {
			return 0, errBad
		}
		return m.Data, nil
	})
	s, err := sink.New(sink.Options[int]{Binding: binding(h)})
	if err != nil {
		t.Fatal(err)
	}
	rec := acker.NewRecorder(false)
	var batches sync.WaitGroup
	batches.Add(n / size)
	bh := s.BatchHandler()
	run(t, pipeline.Options[int, int]{
		Name:       "a",
		Drainers:   []pipeline.Drainer{s},
		Producer:   producer.Options[int]{Source: &listSource{n: n, ack: rec}},
		Processors: processor.Options[int, int]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }},
		Batchers: []batcher.Options[int]{{Name: "default", BatchSize: size, BatchTimeout: deadline,
			Handle: func(ctx context.Context, b []*message.Message[int], info message.BatchInfo) error {
				defer batches.Done()
				return bh(ctx, b, info)
			}}},
	})
	wait.For(t, "A's outcomes", func() bool { return rec.Total() == n })
	batches.Wait()
	calls := rec.Calls()
	if len(calls) != n/size {
		t.Fatalf("%d Ack calls for %d batches", len(calls), n/size)
	}
	for _, c := range calls {
		if len(c.Successful)+len(c.Failed) != size {
			t.Fatalf("an Ack call carried %d outcomes, want a whole batch of %d", len(c.Successful)+len(c.Failed), size)
		}
	}
	if f := rec.Failed(); len(f) != 1 || f[0].ID != 42 || !errors.Is(f[0].Err, errBad) {
		t.Fatalf("failed outcomes %v, want value 42 with B's error", f)
	}
}

// Stopping the upstream pipeline first drains both: A's Stop returns only
// when every message it published has its downstream outcome reported to
// A's source, and then B stops with nothing left in flight.
func TestDrainBothPipelines(t *testing.T) {
	const n = 500
	h := newTopic(t, "t", auto(topic.Options{}))
	src := newSource(t, h, topic.Balanced("b"))
	b := downstream(t, "b", src, 2, func(_ context.Context, m *message.Message[int]) (int, error) {
		yield()
		return m.Data, nil
	})
	rec := acker.NewRecorder(false)
	a, s := upstream(t, "a", n, rec, binding(h))
	wait.For(t, "A to publish everything", func() bool { return s.Stats().Published == n })
	stop(t, a)
	if rec.Total() != n || rec.FailedCount() != 0 {
		t.Fatalf("after A stopped: %d outcomes (%d failed), want %d successful", rec.Total(), rec.FailedCount(), n)
	}
	if st := s.Stats(); st.InFlight != 0 || st.Acked != n {
		t.Fatalf("sink stats after A stopped: %+v", st)
	}
	stop(t, b)
	if st := h.Stats(); st.InFlight != 0 {
		t.Fatalf("topic stats after both stopped: %+v", st)
	}
	if st := src.Stats(); st.Acked != n {
		t.Fatalf("source stats %+v", st)
	}
}

// When the topic closes, the topic source ends and the downstream pipeline
// drains and stops by itself, having handled everything delivered to it.
func TestTopicCloseEndsSource(t *testing.T) {
	h := newTopic(t, "t", topic.Options{})
	got := newCounter()
	src := newSource(t, h, topic.Balanced("b"))
	b := downstream(t, "b", src, 2, func(_ context.Context, m *message.Message[int]) (int, error) {
		got.add(m.Data, 0)
		return m.Data, nil
	})
	for i := range 100 {
		if err := h.Publish(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	h.Close()
	wait.For(t, "B to stop by itself", func() bool {
		select {
		case <-b.Done():
			return true
		default:
			return false
		}
	})
	if got.count() != 100 || b.Err() != nil {
		t.Fatalf("B handled %d of 100 (err %v)", got.count(), b.Err())
	}
	// The publishes were untracked: the topic answers the source's acks
	// with ErrMessageNotTracked, which the source only counts.
	if st := src.Stats(); st.NotTracked != 100 || st.Acked != 0 {
		t.Fatalf("source stats %+v, want 100 not-tracked acks", st)
	}
}

// A message that B fails with DispositionDiscard is acked on the topic (it
// is done with), so A's source sees it successful, and B's source counts
// it acked (Stats.Acked), not nacked.
func TestDiscardDispositionAcks(t *testing.T) {
	const n = 20
	h := newTopic(t, "t", auto(topic.Options{}))
	src := newSource(t, h, topic.Balanced("b"))
	run(t, pipeline.Options[int, int]{
		Name:     "b",
		Producer: producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{
			Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				if m.Data%2 == 0 {
					return 0, errBad
				}
				return m.Data, nil
			},
			HandleFailed: func(_ context.Context, failed []*message.Message[int]) {
				for _, m := range failed {
					if m.Data%4 == 0 {
						m.SetDisposition(acker.DispositionDiscard)
					}
				}
			},
		},
	})
	rec := acker.NewRecorder(false)
	upstream(t, "a", n, rec, binding(h))
	wait.For(t, "A's outcomes", func() bool { return rec.Total() == n })
	for _, o := range rec.Failed() {
		if o.ID%4 != 2 {
			t.Fatalf("message %d failed (%v): only values ≡ 2 mod 4 should", o.ID, o.Err)
		}
	}
	if rec.FailedCount() != n/4 {
		t.Fatalf("%d failed, want %d", rec.FailedCount(), n/4)
	}
	wait.For(t, "every outcome counted", func() bool { st := src.Stats(); return st.Acked+st.Nacked == n })
	if st := src.Stats(); st.Acked != n-n/4 || st.Nacked != n/4 {
		t.Fatalf("stats %+v, want %d acked (the discarded among them) and %d nacked", st, n-n/4, n/4)
	}
}

// Guarantee: a balanced mode whose consumer group is not a valid name is
// refused by Validate (which the pipeline asks through Info) as well as by
// New, with a validate.Errors naming source.mode.
func TestOptionsValidateRejectsAnInvalidGroupName(t *testing.T) {
	h := newTopic(t, "t", topic.Options{})
	opts := source.Options[int]{Topic: h, Mode: topic.Balanced("billing team")}
	var es validate.Errors
	if err := opts.WithDefaults().Validate(); !errors.As(err, &es) || !es.Has("source.mode", "name") {
		t.Fatalf("Validate with group %q = %v, want an error naming source.mode", opts.Mode.Group(), err)
	}
	if _, err := source.New(opts); !errors.As(err, &es) || !es.Has("source.mode", "name") {
		t.Fatalf("New with group %q = %v, want an error naming source.mode", opts.Mode.Group(), err)
	}
}
