package topic_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic"
)

func newIntTopic(t *testing.T, o topic.Options) *topic.Handle[int] {
	t.Helper()
	h, err := topic.NewTopic[int]("t", o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func subscribeInt(t *testing.T, h *topic.Handle[int], mode topic.SubscriptionMode) *topic.Subscription[int] {
	t.Helper()
	s, err := h.Subscribe(t.Context(), mode, topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// outcomeLog records the outcomes tracked publishes report, by the value
// each published.
type outcomeLog struct {
	mu  sync.Mutex
	got map[int][]topic.ReceiptOutcome
}

// done is the callback for the publish of value i.
func (l *outcomeLog) done(i int) func(topic.Result) {
	return func(r topic.Result) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.got == nil {
			l.got = make(map[int][]topic.ReceiptOutcome)
		}
		l.got[i] = append(l.got[i], r.Outcome)
	}
}

// of returns the outcomes the publish of value i has reported so far.
func (l *outcomeLog) of(i int) []topic.ReceiptOutcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got[i])
}

func newTracked(t *testing.T, h *topic.Handle[int], o topic.TrackedOptions) *topic.TrackedPublisher[int] {
	t.Helper()
	p, err := h.Tracked(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A tracked publisher with zero MaxInFlight takes the topic's ack_propagation.max_in_flight.
func TestTrackedInheritsTopicMaxInFlight(t *testing.T) {
	h := newIntTopic(t, topic.Options{AckPropagation: topic.AckPropagation{MaxInFlight: 2}})
	subscribeInt(t, h, topic.Balanced("g"))
	p := newTracked(t, h, topic.TrackedOptions{})
	for i := range 2 {
		if _, out, err := p.TryPublish(i); err != nil || out != topic.Published {
			t.Fatalf("TryPublish %d = %v, %v", i, out, err)
		}
	}
	if _, out, err := p.TryPublish(3); err != nil || out != topic.MaxInFlightReached {
		t.Fatalf("TryPublish beyond the topic's max_in_flight = %v, %v; want MaxInFlightReached", out, err)
	}
}

// A tracked publisher with zero Timeout takes the topic's ack_propagation.timeout.
func TestTrackedInheritsTopicTimeout(t *testing.T) {
	h := newIntTopic(t, topic.Options{AckPropagation: topic.AckPropagation{Timeout: 20 * time.Millisecond}})
	subscribeInt(t, h, topic.Balanced("g"))
	p := newTracked(t, h, topic.TrackedOptions{})
	r, err := p.Publish(testCtx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := r.Wait(ctx)
	if err != nil || res.Outcome != topic.TimedOut {
		t.Fatalf("receipt = %+v, %v; want TimedOut after the topic's 20ms timeout", res, err)
	}
}

// A tracked publish that is dropped on full, or fails (ctx done), holds no in-flight slot afterwards.
func TestFailedTrackedPublishFreesSlot(t *testing.T) {
	h := newIntTopic(t, topic.Options{Balanced: topic.BalancedPolicy{Capacity: 1}})
	subscribeInt(t, h, topic.Balanced("g"))
	if err := h.Publish(testCtx(t), 0); err != nil { // fills the queue
		t.Fatal(err)
	}
	p := newTracked(t, h, topic.TrackedOptions{MaxInFlight: 1})
	if r, out, err := p.TryPublish(1); err != nil || out != topic.DroppedOnFull || r != nil {
		t.Fatalf("TryPublish into a full queue = %v, %v, %v; want DroppedOnFull", r, out, err)
	}
	if n := p.InFlight(); n != 0 {
		t.Fatalf("InFlight after DroppedOnFull = %d, want 0", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err := p.Publish(ctx, 2)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish into a full queue = %v, want DeadlineExceeded", err)
	}
	if n, st := p.InFlight(), h.Stats(); n != 0 || st.InFlight != 0 {
		t.Fatalf("InFlight after a failed Publish = %d (topic %d), want 0", n, st.InFlight)
	}
}

// heldBackend is a one-topic test backend whose subscription hands out the
// published envelope only when release is closed, even after its Close, so
// a test can deliver a tracked message to a subscription that is closing.
type heldBackend struct {
	st *heldState
}

func (heldBackend) Name() string { return "held" }

func (heldBackend) Capabilities() topic.Capabilities {
	return topic.Capabilities{
		Modes:       []topic.Mode{topic.BalancedOnly},
		OnFull:      []topic.OnFull{topic.Block, topic.DropNewest},
		Propagation: []topic.PropagationMode{topic.PropagationDisabled, topic.PropagationAuto},
	}
}

func (b heldBackend) NewTopic(context.Context, topic.Name, topic.Options) (topic.State[int], error) {
	return b.st, nil
}

type heldState struct {
	release chan struct{}
	env     chan topic.Envelope[int]
}

func (s *heldState) Publish(_ context.Context, e topic.Envelope[int], _ topic.OnFull) (topic.PublishOutcome, error) {
	return s.TryPublish(e)
}

func (s *heldState) TryPublish(e topic.Envelope[int]) (topic.PublishOutcome, error) {
	e.Ticket.SetRecipients(1)
	s.env <- e
	return topic.Published, nil
}

func (s *heldState) Subscribe(context.Context, topic.SubscriptionMode, topic.SubscriberOptions) (topic.SubscriptionState[int], error) {
	return s, nil
}

func (s *heldState) Stats() topic.StateStats { return topic.StateStats{} }

func (s *heldState) Close() {}

func (s *heldState) Settle(topic.MessageID, error) error { return topic.ErrMessageNotTracked }

func (s *heldState) Receive(ctx context.Context, dst []topic.Envelope[int]) (int, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	dst[0] = <-s.env
	return 1, nil
}

// A tracked delivery that reaches a subscription after it was closed is nacked with ErrDeliveryDropped, not lost, and Receive reports the subscription closed.
func TestDeliveryToClosingSubscriptionNacks(t *testing.T) {
	st := &heldState{release: make(chan struct{}), env: make(chan topic.Envelope[int], 1)}
	h, err := topic.NewTopic[int]("held", topic.Options{}, heldBackend{st: st})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	sub, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := newTracked(t, h, topic.TrackedOptions{Timeout: time.Minute})
	r, err := p.Publish(testCtx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := sub.Receive(testCtx(t))
		got <- err
	}()
	sub.Close()
	close(st.release)
	if err := <-got; !errors.Is(err, topic.ErrSubscriptionClosed) {
		t.Fatalf("Receive on a closed subscription = %v, want ErrSubscriptionClosed", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := r.Wait(ctx)
	if err != nil || res.Outcome != topic.Nacked || !errors.Is(res.Reason, topic.ErrDeliveryDropped) {
		t.Fatalf("receipt = %+v, %v; want Nacked with ErrDeliveryDropped", res, err)
	}
}

// Guarantee: Receipt.Wait whose context ends before the outcome is known
// returns the context's error (context.Canceled, or
// context.DeadlineExceeded past its deadline), and the publish stays
// pending: its outcome is still reported once the subscriber acks it.
func TestReceiptWaitReturnsTheErrorOfItsEndedContext(t *testing.T) {
	h := newIntTopic(t, topic.Options{})
	sub := subscribeInt(t, h, topic.Balanced("g"))
	p := newTracked(t, h, topic.TrackedOptions{Timeout: time.Hour})
	r, err := p.Publish(testCtx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(testCtx(t))
	cancel()
	expired, stop := context.WithTimeout(testCtx(t), time.Millisecond)
	defer stop()
	for ctx, want := range map[context.Context]error{cancelled: context.Canceled, expired: context.DeadlineExceeded} {
		if res, err := r.Wait(ctx); !errors.Is(err, want) || res.Outcome != 0 {
			t.Errorf("Wait with an ended context = %+v, %v; want no outcome and an error wrapping %v", res, err, want)
		}
	}
	if res, ok := r.Result(); ok {
		t.Fatalf("the publish has the outcome %+v once Wait gave up, want it pending", res)
	}
	it, err := sub.Receive(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	sub.Ack(it.ID)
	if res, err := r.Wait(testCtx(t)); err != nil || res.Outcome != topic.Acked {
		t.Fatalf("Wait once the subscriber acked = %+v, %v; want Acked", res, err)
	}
}
