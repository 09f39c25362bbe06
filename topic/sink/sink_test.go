package sink_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
	"github.com/boulevard-go/boulevard/validate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rig is a topic, a subscription to it and a sink publishing into it.
func rig(t *testing.T, opts topic.Options, onFull topic.OnFull, mode topic.SubscriptionMode) (*topic.Handle[int], *topic.Subscription[int], *sink.Sink[int]) {
	t.Helper()
	h, err := topic.NewTopic[int]("t", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	var sub *topic.Subscription[int]
	if mode != (topic.SubscriptionMode{}) {
		if sub, err = h.Subscribe(mode, topic.SubscriberOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sub.Close)
	}
	o := h.Options()
	s, err := sink.New(sink.Options[int]{Binding: topic.Binding[int]{Handle: h, OnFull: onFull, AckPropagation: o.AckPropagation}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return h, sub, s
}

func autoOpts(timeout time.Duration) topic.Options {
	return topic.Options{AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto, Timeout: timeout}}
}

// publishOne publishes value v on behalf of a message acknowledged to rec.
func publishOne(t *testing.T, s *sink.Sink[int], rec *acker.Recorder, v int) *message.Message[int] {
	t.Helper()
	m := message.New(v, rec, uint64(v))
	if err := s.Publish(ctxT(t), m); err != nil {
		t.Fatal(err)
	}
	return m
}

func failedWith(t *testing.T, rec *acker.Recorder, sentinels ...error) error {
	t.Helper()
	if err := rec.Wait(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	f := rec.Failed()
	if len(f) != 1 || rec.Total() != 1 {
		t.Fatalf("recorded %d outcomes, %d failed; want one failure", rec.Total(), len(f))
	}
	for _, s := range sentinels {
		if !errors.Is(f[0].Err, s) {
			t.Fatalf("outcome error %v does not wrap %v", f[0].Err, s)
		}
	}
	var oe *sink.OutcomeError
	if !errors.As(f[0].Err, &oe) || oe.Topic != "t" {
		t.Fatalf("outcome error %v is not an *OutcomeError for topic t", f[0].Err)
	}
	return f[0].Err
}

// With propagation auto, a published message is deferred, and its upstream
// outcome is reported (successful) when the subscriber acks it, not before.
func TestAckedAfterSubscriberAck(t *testing.T) {
	_, sub, s := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
	rec := acker.NewRecorder(false)
	m := publishOne(t, s, rec, 7)
	if !m.Deferred() || !s.Tracked() {
		t.Fatal("a tracked publish did not defer the message")
	}
	it, err := sub.Receive(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Total() != 0 {
		t.Fatal("outcome reported before the subscriber acked")
	}
	if err := sub.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	if rec.Total() != 1 || rec.FailedCount() != 0 || rec.Successful()[0].ID != 7 {
		t.Fatalf("outcomes %+v, want 7 successful", rec.Calls())
	}
	if st := s.Stats(); st.Acked != 1 || st.InFlight != 0 || st.Published != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A publish that nobody acks within the timeout is reported failed with
// ErrTimedOut.
func TestTimedOut(t *testing.T) {
	_, sub, s := rig(t, autoOpts(20*time.Millisecond), topic.Block, topic.Balanced("g"))
	rec := acker.NewRecorder(false)
	publishOne(t, s, rec, 1)
	if _, err := sub.Receive(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	err := failedWith(t, rec, sink.ErrTimedOut)
	if err.Error() != "topic t: downstream outcome timed out" {
		t.Fatalf("error %q", err)
	}
}

// Closing the sink reports its unresolved publishes as failed (ErrClosed,
// reason topic.ErrPublisherClosed), and later publishes fail without
// deferring the message.
func TestCloseFailsPending(t *testing.T) {
	_, _, s := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
	rec := acker.NewRecorder(false)
	publishOne(t, s, rec, 1)
	s.Close()
	failedWith(t, rec, sink.ErrClosed, topic.ErrPublisherClosed)
	m := message.New(2, rec, 2)
	if err := s.Publish(ctxT(t), m); !errors.Is(err, topic.ErrPublisherClosed) || m.Deferred() {
		t.Fatalf("publish after Close: %v (deferred %v)", err, m.Deferred())
	}
}

// Closing the topic reports the sink's unresolved publishes as failed
// (ErrClosed, reason topic.ErrTopicClosed).
func TestTopicClosedFailsPending(t *testing.T) {
	h, _, s := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
	rec := acker.NewRecorder(false)
	publishOne(t, s, rec, 1)
	h.Close()
	err := failedWith(t, rec, sink.ErrClosed, topic.ErrTopicClosed)
	if err.Error() != "topic t: closed before the downstream outcome: topic: closed" {
		t.Fatalf("error %q", err)
	}
}

// A subscriber's nack reaches the upstream acknowledger with the
// subscriber's reason.
func TestNackReason(t *testing.T) {
	_, sub, s := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
	rec := acker.NewRecorder(false)
	publishOne(t, s, rec, 1)
	it, err := sub.Receive(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	reason := errors.New("unparseable")
	if err := sub.Nack(it.ID, reason); err != nil {
		t.Fatal(err)
	}
	err = failedWith(t, rec, sink.ErrNacked, reason)
	if err.Error() != "topic t: downstream nacked: unparseable" {
		t.Fatalf("error %q", err)
	}
}

// A publish that reaches no subscriber is reported failed at once
// (topic.ErrNoSubscribers).
func TestNoSubscribers(t *testing.T) {
	o := autoOpts(0)
	o.Mode = topic.BroadcastOnly
	_, _, s := rig(t, o, topic.Block, topic.SubscriptionMode{})
	rec := acker.NewRecorder(false)
	publishOne(t, s, rec, 1)
	failedWith(t, rec, sink.ErrNacked, topic.ErrNoSubscribers)
}

// queue_on_full drop_newest with propagation auto: a publish into a full
// queue is an error and the message is not deferred (the pipeline fails it).
func TestDropNewestTracked(t *testing.T) {
	o := autoOpts(0)
	o.Balanced.Capacity = 1
	_, _, s := rig(t, o, topic.DropNewest, topic.Balanced("g"))
	rec := acker.NewRecorder(false)
	publishOne(t, s, rec, 1)
	m := message.New(2, rec, 2)
	if err := s.Publish(ctxT(t), m); !errors.Is(err, topic.ErrDroppedOnFull) || m.Deferred() {
		t.Fatalf("publish into a full queue: %v (deferred %v)", err, m.Deferred())
	}
	if st := s.Stats(); st.InFlight != 1 || st.Published != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// queue_on_full drop_newest with propagation disabled: a publish into a
// full queue is counted as dropped and the message is left to the pipeline
// (handed over).
func TestDropNewestUntracked(t *testing.T) {
	o := topic.Options{Balanced: topic.BalancedPolicy{Capacity: 1}}
	_, _, s := rig(t, o, topic.DropNewest, topic.Balanced("g"))
	for v := range 3 {
		m := message.New(v, nil, 0)
		if err := s.Publish(ctxT(t), m); err != nil || m.Deferred() {
			t.Fatalf("publish %d: %v (deferred %v)", v, err, m.Deferred())
		}
	}
	if st := s.Stats(); st.Published != 1 || st.Dropped != 2 || s.Tracked() {
		t.Fatalf("stats %+v, want 1 published and 2 dropped", st)
	}
}

// Wait returns once every tracked publish has been reported; Drain with a
// context that ends first returns its error and reports what was left as
// failed.
func TestWaitAndDrain(t *testing.T) {
	_, sub, s := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
	rec := acker.NewRecorder(false)
	for v := range 3 {
		publishOne(t, s, rec, v)
	}
	waited := make(chan error, 1)
	go func() { waited <- s.Wait(ctxT(t)) }()
	for range 2 {
		it, err := sub.Receive(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.Ack(it.ID); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-waited:
		t.Fatalf("Wait returned (%v) with a publish unresolved", err)
	case <-time.After(20 * time.Millisecond):
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Drain(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain: %v, want context.Canceled", err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if rec.Total() != 3 || rec.FailedCount() != 1 || !errors.Is(rec.Failed()[0].Err, sink.ErrClosed) {
		t.Fatalf("outcomes: %d (%d failed: %v)", rec.Total(), rec.FailedCount(), rec.Failed())
	}
}

// orderSource records the order of the calls GuardSource makes.
type orderSource struct {
	mu    sync.Mutex
	calls []string
}

func (o *orderSource) note(s string) {
	o.mu.Lock()
	o.calls = append(o.calls, s)
	o.mu.Unlock()
}

func (o *orderSource) Run(context.Context, *producer.Stage[int]) error { return nil }
func (o *orderSource) Close(context.Context) error                     { o.note("source closed"); return nil }
func (o *orderSource) Info() (producer.Info, error) {
	return producer.Info{Ordered: true, Window: 7}, errors.New("bad source")
}

type drainer struct{ o *orderSource }

func (d drainer) Drain(context.Context) error { d.o.note("sink drained"); return nil }

// GuardSource drains the sinks before it closes the source, and passes
// Info (ordering, window, option errors) through.
func TestGuardSource(t *testing.T) {
	o := &orderSource{}
	g := sink.GuardSource[int](o, drainer{o}, drainer{o})
	if err := g.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"sink drained", "sink drained", "source closed"}; !slices.Equal(o.calls, want) {
		t.Fatalf("calls %v, want %v", o.calls, want)
	}
	info, err := g.Info()
	if err == nil || err.Error() != "bad source" {
		t.Fatalf("Info: %v", err)
	}
	if info != (producer.Info{Ordered: true, Window: 7}) {
		t.Fatalf("Info %+v not passed through", info)
	}
}

// A binding without a topic handle is rejected, naming the field.
func TestNewValidates(t *testing.T) {
	_, err := sink.New(sink.Options[int]{})
	if !errors.Is(err, validate.ErrInvalid) || err.Error() != "invalid options: sink.binding.handle is required" {
		t.Fatalf("got %v", err)
	}
}
