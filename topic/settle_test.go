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

// settlingBackend is a one-topic backend that settles deliveries, as a
// durable log does: it records every Settle and knows each id once.
type settlingBackend struct {
	st   *settlingState
	caps topic.Capabilities
}

func (settlingBackend) Name() string { return "settling" }

func (b settlingBackend) Capabilities() topic.Capabilities { return b.caps }

func (b settlingBackend) NewTopic(context.Context, topic.Name, topic.Options) (topic.State[int], error) {
	return b.st, nil
}

type settlingState struct {
	mu      sync.Mutex
	queue   []topic.Envelope[int]
	open    map[topic.MessageID]bool
	settled []error // reasons, in call order (nil = ack)
	fail    error   // returned by Settle when set
	// redeliver queues a nacked message again, the envelope as it was
	// published (ticket included), as a durable log delivers it again.
	redeliver bool
	held      map[topic.MessageID]topic.Envelope[int] // received, when redeliver
}

func (s *settlingState) Publish(_ context.Context, e topic.Envelope[int], _ topic.OnFull) (topic.PublishOutcome, error) {
	return s.TryPublish(e)
}

func (s *settlingState) TryPublish(e topic.Envelope[int]) (topic.PublishOutcome, error) {
	e.Ticket.SetRecipients(1)
	s.mu.Lock()
	s.queue = append(s.queue, e)
	s.mu.Unlock()
	return topic.Published, nil
}

func (s *settlingState) Subscribe(context.Context, topic.SubscriptionMode, topic.SubscriberOptions) (topic.SubscriptionState[int], error) {
	return s, nil
}

func (s *settlingState) Stats() topic.StateStats { return topic.StateStats{} }

func (s *settlingState) Close() {}

func (s *settlingState) Receive(_ context.Context, dst []topic.Envelope[int]) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := copy(dst, s.queue)
	s.queue = s.queue[n:]
	for _, e := range dst[:n] {
		s.open[e.ID] = true
		if s.redeliver {
			s.held[e.ID] = e
		}
	}
	return n, nil
}

func (s *settlingState) Settle(id topic.MessageID, reason error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	if !s.open[id] {
		return topic.ErrMessageNotTracked
	}
	delete(s.open, id)
	s.settled = append(s.settled, reason)
	if e, ok := s.held[id]; ok {
		delete(s.held, id)
		if reason != nil {
			s.queue = append(s.queue, e)
		}
	}
	return nil
}

func newSettling(t *testing.T, track bool) (*topic.Handle[int], *settlingState) {
	t.Helper()
	st := &settlingState{open: make(map[topic.MessageID]bool), held: make(map[topic.MessageID]topic.Envelope[int])}
	caps := topic.Capabilities{
		Modes:       []topic.Mode{topic.BalancedOnly},
		OnFull:      []topic.OnFull{topic.Block},
		Propagation: []topic.PropagationMode{topic.PropagationDisabled},
		Features:    []topic.Feature{topic.FeatureDurable},
	}
	if track {
		caps.Propagation = append(caps.Propagation, topic.PropagationAuto)
	}
	h, err := topic.NewTopic[int]("settling", topic.Options{}, settlingBackend{st: st, caps: caps})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h, st
}

// On a backend that settles deliveries, Ack and Nack of untracked messages
// reach the backend (nil reason for an ack, ErrNacked for a nack without
// reason) and succeed; settling twice is refused.
func TestDurableBackendSettlesEveryMessage(t *testing.T) {
	h, st := newSettling(t, false)
	sub := subscribeInt(t, h, topic.Balanced("g"))
	for v := range 3 {
		if err := h.Publish(t.Context(), v); err != nil {
			t.Fatal(err)
		}
	}
	var ids []topic.MessageID
	for range 3 {
		it, err := sub.Receive(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	boom := errors.New("boom")
	if err := sub.Ack(ids[0]); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if err := sub.Nack(ids[1], nil); err != nil {
		t.Fatalf("Nack(nil): %v", err)
	}
	if err := sub.Nack(ids[2], boom); err != nil {
		t.Fatalf("Nack(boom): %v", err)
	}
	if err := sub.Ack(ids[0]); !errors.Is(err, topic.ErrMessageNotTracked) {
		t.Fatalf("second Ack = %v, want ErrMessageNotTracked", err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.settled) != 3 || st.settled[0] != nil || !errors.Is(st.settled[1], topic.ErrNacked) || st.settled[2] != boom {
		t.Fatalf("settled reasons = %v, want [nil ErrNacked boom]", st.settled)
	}
}

// A backend's settle failure reaches the caller of Ack; a tracked publish
// still resolves with the subscriber's outcome.
func TestSettleFailureIsReturned(t *testing.T) {
	h, st := newSettling(t, true)
	sub := subscribeInt(t, h, topic.Balanced("g"))
	p, err := h.Tracked(topic.TrackedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r, err := p.Publish(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err := sub.Receive(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lost := errors.New("connection lost")
	st.mu.Lock()
	st.fail = lost
	st.mu.Unlock()
	if err := sub.Ack(it.ID); !errors.Is(err, lost) {
		t.Fatalf("Ack = %v, want the backend's error", err)
	}
	res, err := r.Wait(t.Context())
	if err != nil || res.Outcome != topic.Acked {
		t.Fatalf("receipt = %+v, %v; want Acked", res, err)
	}
}

// A backend that cannot carry outcomes back (no PropagationAuto) refuses
// tracked publishers with an error naming the setting and the backend.
func TestTrackedRefusedWithoutPropagation(t *testing.T) {
	h, _ := newSettling(t, false)
	_, err := h.Tracked(topic.TrackedOptions{})
	var ue *topic.UnsupportedError
	if !errors.As(err, &ue) || !errors.Is(err, topic.ErrUnsupportedPolicy) ||
		ue.Backend != "settling" || ue.What != "ack_propagation.mode" || ue.Value != "auto" {
		t.Fatalf("Tracked = %v, want *UnsupportedError for ack_propagation.mode auto on settling", err)
	}
}

// A durable backend delivers a nacked message again, with the ticket it
// was published with. Once the first publish has its outcome (nacked),
// acking that redelivery must settle nothing else: in particular not a
// later publish, which must keep waiting for its own message's outcome.
func TestRedeliveryAckSettlesNoLaterPublish(t *testing.T) {
	h, st := newSettling(t, true)
	st.redeliver = true
	sub := subscribeInt(t, h, topic.Balanced("g"))
	p, err := h.Tracked(topic.TrackedOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var log outcomeLog
	receive := func(want int) topic.MessageID {
		it, err := sub.Receive(t.Context())
		if err != nil || it.Value != want {
			t.Fatalf("received %+v, %v; want value %d", it, err, want)
		}
		return it.ID
	}

	if err := p.PublishFunc(t.Context(), 1, log.done(1)); err != nil {
		t.Fatal(err)
	}
	if err := sub.Nack(receive(1), nil); err != nil {
		t.Fatal(err)
	}
	if o := log.of(1); !slices.Equal(o, []topic.ReceiptOutcome{topic.Nacked}) {
		t.Fatalf("first publish: %v, want [nacked]", o)
	}
	if err := p.PublishFunc(t.Context(), 2, log.done(2)); err != nil {
		t.Fatal(err)
	}
	_ = sub.Ack(receive(1)) // the redelivery of message 1
	if o := log.of(2); len(o) != 0 {
		t.Fatalf("acking the redelivery of message 1 settled publish 2, never received: %v", o)
	}
	if o := log.of(1); len(o) != 1 {
		t.Fatalf("first publish reported %v, want exactly one outcome", o)
	}
	if err := sub.Ack(receive(2)); err != nil {
		t.Fatal(err)
	}
	if o := log.of(2); !slices.Equal(o, []topic.ReceiptOutcome{topic.Acked}) {
		t.Fatalf("second publish: %v, want [acked]", o)
	}
}
