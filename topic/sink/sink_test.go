package sink_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
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
	return rigWith(t, opts, mode, sink.Options[int]{Binding: topic.Binding[int]{OnFull: onFull}})
}

// rigWith is rig with the sink's options so: its binding's Handle and
// AckPropagation are the topic's. A zero mode subscribes nothing.
func rigWith(t *testing.T, opts topic.Options, mode topic.SubscriptionMode, so sink.Options[int]) (*topic.Handle[int], *topic.Subscription[int], *sink.Sink[int]) {
	t.Helper()
	h, err := topic.NewTopic[int]("t", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	var sub *topic.Subscription[int]
	if mode != (topic.SubscriptionMode{}) {
		if sub, err = h.Subscribe(t.Context(), mode, topic.SubscriberOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sub.Close)
	}
	so.Binding.Handle, so.Binding.AckPropagation = h, h.Options().AckPropagation
	s, err := sink.New(so)
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

// ackNext receives the next message of sub and acks it.
func ackNext(t *testing.T, sub *topic.Subscription[int]) {
	t.Helper()
	it, err := sub.Receive(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
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

// A Drain that saw every publish reported closes the sink as well: later
// publishes fail without deferring the message.
func TestADrainThatCompletesClosesTheSink(t *testing.T) {
	_, sub, s := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
	rec := acker.NewRecorder(false)
	publishOne(t, s, rec, 1)
	it, err := sub.Receive(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Drain(ctxT(t)); err != nil {
		t.Fatalf("Drain with every publish reported: %v", err)
	}
	m := message.New(2, rec, 2)
	if err := s.Publish(ctxT(t), m); !errors.Is(err, topic.ErrPublisherClosed) || m.Deferred() {
		t.Fatalf("publish after a completed Drain: %v (deferred %v), want topic.ErrPublisherClosed, not deferred", err, m.Deferred())
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

// closeSource delivers n values (ack id = value) under its feed's permits,
// then returns; its Close records how many outcomes its acknowledger had
// been given by then.
type closeSource struct {
	producer.Basic
	n        int
	rec      *acker.Recorder
	atClose  atomic.Int64
	closings atomic.Int32
}

func (c *closeSource) Run(ctx context.Context, st *producer.Stage[int]) error {
	feed := st.NewFeed("values", nil)
	for i := 0; i < c.n; {
		k, err := feed.Acquire(ctx, c.n-i)
		if err != nil {
			return nil
		}
		for range k {
			feed.Deliver(message.New(i, c.rec, uint64(i)))
			i++
		}
	}
	return nil
}

func (c *closeSource) Close(context.Context) error {
	c.atClose.Store(int64(c.rec.Total()))
	c.closings.Add(1)
	return nil
}

// A Sink is a pipeline.Drainer: a pipeline that lists it in its Drainers
// closes its source only once every tracked publish has had its downstream
// outcome reported to the source's acknowledger, even when the downstream
// acks come after every stage of the pipeline has returned.
func TestPipelineDrainsSinkBeforeClosingSource(t *testing.T) {
	const n = 20
	_, sub, s := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
	var _ pipeline.Drainer = s
	src := &closeSource{n: n, rec: acker.NewRecorder(false)}
	var handled atomic.Int32
	publish := s.Handler()
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:     "upstream",
		Drainers: []pipeline.Drainer{s},
		Producer: producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{Handle: func(ctx context.Context, m *message.Message[int]) (int, error) {
			defer handled.Add(1)
			return publish(ctx, m)
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctxT(t)) }()
	// Every message handled and deferred: the stages return now, while
	// no downstream outcome has arrived yet.
	for deadline := time.Now().Add(10 * time.Second); handled.Load() < n; {
		select {
		case err := <-ran:
			t.Fatalf("Run returned (%v) with %d of %d messages handled", err, handled.Load(), n)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages handled within 10s", handled.Load(), n)
		}
		runtime.Gosched()
	}
	for range n {
		it, err := sub.Receive(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if src.closings.Load() != 0 {
			t.Fatal("the source was closed before the downstream outcomes arrived")
		}
		if err := sub.Ack(it.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if got := src.atClose.Load(); got != n || src.rec.FailedCount() != 0 {
		t.Fatalf("the source was closed with %d of %d outcomes reported (%d failed)", got, n, src.rec.FailedCount())
	}
}

// Guarantee: Handler's processor handler publishes each message's payload
// and returns it unchanged, for the pipeline's later stages.
func TestHandlerPublishesAndReturnsThePayloadUnchanged(t *testing.T) {
	_, sub, s := rig(t, topic.Options{}, topic.Block, topic.Balanced("g"))
	got, err := s.Handler()(ctxT(t), message.New(5, nil, 0))
	if err != nil || got != 5 {
		t.Fatalf("handler = %d, %v; want the payload 5 returned", got, err)
	}
	if it, err := sub.Receive(ctxT(t)); err != nil || it.Value != 5 {
		t.Fatalf("Receive = %+v, %v; want the payload 5 published", it, err)
	}
}

// Guarantee: a publish into a closed topic returns an error that names
// the topic and wraps topic.ErrTopicClosed, tracked or not.
func TestPublishIntoAClosedTopicNamesTheTopic(t *testing.T) {
	for name, o := range map[string]topic.Options{"untracked": {}, "tracked": autoOpts(0)} {
		t.Run(name, func(t *testing.T) {
			h, _, s := rig(t, o, topic.Block, topic.Balanced("g"))
			h.Close()
			err := s.Publish(ctxT(t), message.New(1, acker.NewRecorder(false), 1))
			if want := "sink: publish into t: topic: closed"; !errors.Is(err, topic.ErrTopicClosed) || err.Error() != want {
				t.Fatalf("Publish = %v, want %q wrapping topic.ErrTopicClosed", err, want)
			}
		})
	}
}

// A binding without a topic handle is rejected, naming the field.
func TestNewValidates(t *testing.T) {
	_, err := sink.New(sink.Options[int]{})
	if !errors.Is(err, validate.ErrInvalid) || err.Error() != "invalid options: sink.binding.handle is required" {
		t.Fatalf("got %v", err)
	}
	if verr := (sink.Options[int]{}).WithDefaults().Validate(); verr == nil || verr.Error() != err.Error() {
		t.Fatalf("Validate = %v, want what New reports", verr)
	}
	h, err := topic.NewTopic[int]("t", topic.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := (sink.Options[int]{Binding: topic.Binding[int]{Handle: h}}).Validate(); err != nil {
		t.Fatalf("Validate of a binding with a handle = %v", err)
	}
}

// Guarantee: a binding whose on_full or ack_propagation.mode is none of
// the topic's values is refused by New and Validate, naming each field,
// instead of making a sink whose every publish fails (an unknown on_full)
// or that silently publishes untracked (an unknown mode).
func TestNewRejectsUnknownBindingPolicies(t *testing.T) {
	h, err := topic.NewTopic[int]("t", topic.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	opts := sink.Options[int]{Binding: topic.Binding[int]{Handle: h, OnFull: topic.OnFull(7),
		AckPropagation: topic.AckPropagation{Mode: topic.PropagationMode(9)}}}
	s, err := sink.New(opts)
	if s != nil {
		s.Close()
	}
	var es validate.Errors
	if !errors.As(err, &es) || !es.Has("sink.binding.on_full", "oneof") || !es.Has("sink.binding.ack_propagation.mode", "oneof") {
		t.Fatalf("New with on_full 7 and ack_propagation.mode 9 = %v, want errors naming sink.binding.on_full and sink.binding.ack_propagation.mode", err)
	}
	if verr := opts.Validate(); verr == nil || verr.Error() != err.Error() {
		t.Fatalf("Validate = %v, want what New reports", verr)
	}
}

// Guarantee: New with ack propagation auto on a closed topic fails with an
// error that names the topic and wraps topic.ErrTopicClosed.
func TestNewTrackedOnAClosedTopicWrapsTopicClosed(t *testing.T) {
	h, err := topic.NewTopic[int]("t", autoOpts(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	s, err := sink.New(sink.Options[int]{Binding: topic.Binding[int]{Handle: h, AckPropagation: h.Options().AckPropagation}})
	if s != nil {
		s.Close()
	}
	if want := "sink: tracked publisher for t: topic: closed"; !errors.Is(err, topic.ErrTopicClosed) || err == nil || err.Error() != want {
		t.Fatalf("New = %v, want %q wrapping topic.ErrTopicClosed", err, want)
	}
}

// Guarantee: a Publish that waits for room in a full queue (queue_on_full
// block) returns, once its context ends, an error wrapping the context's
// error, with or without ack propagation, and leaves the message
// undeferred for the pipeline to report; nothing more is published.
func TestPublishWaitingForRoomReturnsTheErrorOfItsEndedContext(t *testing.T) {
	for name, o := range map[string]topic.Options{"untracked": {}, "tracked": autoOpts(0)} {
		t.Run(name, func(t *testing.T) {
			o.Balanced.Capacity = 1
			_, _, s := rig(t, o, topic.Block, topic.Balanced("g"))
			rec := acker.NewRecorder(false)
			publishOne(t, s, rec, 1) // fills the queue
			ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Millisecond)
			defer cancel()
			m := message.New(2, rec, 2)
			if err := s.Publish(ctx, m); !errors.Is(err, context.DeadlineExceeded) || m.Deferred() {
				t.Fatalf("Publish into a full queue past its deadline = %v (deferred %v), want an error wrapping context.DeadlineExceeded, not deferred", err, m.Deferred())
			}
			if st := s.Stats(); st.Published != 1 {
				t.Fatalf("stats %+v, want only the first message published", st)
			}
		})
	}
}
