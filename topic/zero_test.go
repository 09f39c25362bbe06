package topic_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic"
)

// call runs f, reporting a panic as a failure of what, so that one misused
// method does not hide the others.
func call(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}

// wantNotCreated checks that err wraps ErrNotCreated.
func wantNotCreated(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, topic.ErrNotCreated) {
		t.Errorf("%s = %v, want an error wrapping ErrNotCreated", what, err)
	}
}

// Guarantee: a zero Handle (declared with var, not made by a broker or
// NewTopic) refuses to publish, subscribe and track with an error wrapping
// ErrNotCreated, reports empty stats, and closes without panicking.
func TestZeroHandleReturnsErrNotCreated(t *testing.T) {
	var h topic.Handle[int]
	ctx := testCtx(t)
	call(t, "Publish", func() { wantNotCreated(t, "Publish", h.Publish(ctx, 1)) })
	call(t, "PublishWith", func() {
		_, err := h.PublishWith(ctx, 1, topic.Block)
		wantNotCreated(t, "PublishWith", err)
	})
	call(t, "PublishWithHeaders", func() {
		_, err := h.PublishWithHeaders(ctx, 1, topic.Headers{"k": "v"}, topic.DropNewest)
		wantNotCreated(t, "PublishWithHeaders", err)
	})
	call(t, "TryPublish", func() {
		_, err := h.TryPublish(1)
		wantNotCreated(t, "TryPublish", err)
	})
	call(t, "Subscribe", func() {
		s, err := h.Subscribe(t.Context(), topic.Broadcast(), topic.SubscriberOptions{})
		if s != nil {
			t.Error("Subscribe on a zero Handle returned a subscription")
		}
		wantNotCreated(t, "Subscribe", err)
		// The zero Handle is reported before an ended context.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err = h.Subscribe(ctx, topic.Broadcast(), topic.SubscriberOptions{})
		wantNotCreated(t, "Subscribe with an ended context", err)
	})
	call(t, "Tracked", func() {
		p, err := h.Tracked(topic.TrackedOptions{})
		if p != nil {
			t.Error("Tracked on a zero Handle returned a publisher")
		}
		wantNotCreated(t, "Tracked", err)
	})
	call(t, "Stats", func() {
		if st := h.Stats(); !reflect.DeepEqual(st, topic.Stats{}) {
			t.Errorf("Stats of a zero Handle = %+v, want zero", st)
		}
	})
	call(t, "Close", h.Close)
	call(t, "Close again", h.Close)
	call(t, "Publish after Close", func() { wantNotCreated(t, "Publish after Close", h.Publish(ctx, 1)) })
}

// Guarantee: a zero Subscription refuses to receive, ack and nack with an
// error wrapping ErrNotCreated, and closes without panicking.
func TestZeroSubscriptionReturnsErrNotCreated(t *testing.T) {
	var s topic.Subscription[int]
	ctx := testCtx(t)
	call(t, "Receive", func() {
		_, err := s.Receive(ctx)
		wantNotCreated(t, "Receive", err)
	})
	call(t, "ReceiveBatch", func() {
		n, err := s.ReceiveBatch(ctx, make([]topic.Item[int], 4))
		if n != 0 {
			t.Errorf("ReceiveBatch on a zero Subscription = %d items, want 0", n)
		}
		wantNotCreated(t, "ReceiveBatch", err)
	})
	call(t, "Ack", func() { wantNotCreated(t, "Ack", s.Ack(1)) })
	call(t, "Nack", func() { wantNotCreated(t, "Nack", s.Nack(1, nil)) })
	call(t, "Close", s.Close)
	call(t, "Close again", s.Close)
}

// Guarantee: a zero TrackedPublisher refuses every publish with an error
// wrapping ErrNotCreated (never calling the done callback), has nothing in
// flight, and closes without panicking.
func TestZeroTrackedPublisherReturnsErrNotCreated(t *testing.T) {
	var p topic.TrackedPublisher[int]
	ctx := testCtx(t)
	done := func(r topic.Result) { t.Errorf("done called with %+v for a refused publish", r) }
	call(t, "Publish", func() {
		r, err := p.Publish(ctx, 1)
		if r != nil {
			t.Error("Publish on a zero TrackedPublisher returned a receipt")
		}
		wantNotCreated(t, "Publish", err)
	})
	call(t, "PublishHeaders", func() {
		_, err := p.PublishHeaders(ctx, 1, topic.Headers{"k": "v"})
		wantNotCreated(t, "PublishHeaders", err)
	})
	call(t, "PublishFunc", func() { wantNotCreated(t, "PublishFunc", p.PublishFunc(ctx, 1, done)) })
	call(t, "PublishFuncHeaders", func() {
		wantNotCreated(t, "PublishFuncHeaders", p.PublishFuncHeaders(ctx, 1, nil, done))
	})
	call(t, "TryPublish", func() {
		r, _, err := p.TryPublish(1)
		if r != nil {
			t.Error("TryPublish on a zero TrackedPublisher returned a receipt")
		}
		wantNotCreated(t, "TryPublish", err)
	})
	call(t, "TryPublishFunc", func() {
		_, err := p.TryPublishFunc(1, done)
		wantNotCreated(t, "TryPublishFunc", err)
	})
	call(t, "InFlight", func() {
		if n := p.InFlight(); n != 0 {
			t.Errorf("InFlight of a zero TrackedPublisher = %d, want 0", n)
		}
	})
	call(t, "Close", p.Close)
	call(t, "Close again", p.Close)
}

// Guarantee: a zero Receipt (declared with var, not returned by a tracked
// publish) has no outcome to wait for: Wait returns an error wrapping
// ErrNotCreated at once, not when its context ends.
func TestZeroReceiptWaitReturnsErrNotCreated(t *testing.T) {
	var r topic.Receipt
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	call(t, "Wait", func() {
		res, err := r.Wait(ctx)
		wantNotCreated(t, "Wait", err)
		if res != (topic.Result{}) {
			t.Errorf("Wait on a zero Receipt = %+v, want the zero Result", res)
		}
	})
	call(t, "Result", func() {
		if res, ok := r.Result(); ok {
			t.Errorf("Result of a zero Receipt = %+v, true; want no outcome", res)
		}
	})
}

// Guarantee: a zero Ticket, like a nil one, stands for an untracked
// publish: a backend may call SetRecipients and Drop on it, and neither
// panics.
func TestZeroTicketIsAnUntrackedPublish(t *testing.T) {
	var tk topic.Ticket
	call(t, "SetRecipients", func() { tk.SetRecipients(2) })
	call(t, "Drop", func() { tk.Drop(topic.ErrDeliveryDropped) })
	call(t, "Drop again", func() { tk.Drop(topic.ErrDeliveryDropped) })
}

// Guarantee: a publish with an OnFull other than Block and DropNewest is
// refused with an error wrapping ErrUnknownOnFull that names the value,
// and publishes nothing, rather than publishing as Block would.
func TestPublishWithUnknownOnFullIsRefused(t *testing.T) {
	h := newIntTopic(t, topic.Options{})
	subscribeInt(t, h, topic.Balanced("g"))
	ctx := testCtx(t)
	for _, of := range []topic.OnFull{99, -1} {
		check := func(what string, out topic.PublishOutcome, err error) {
			t.Helper()
			if !errors.Is(err, topic.ErrUnknownOnFull) || !strings.Contains(err.Error(), of.String()) {
				t.Errorf("%s with %v = %v, %v; want an error wrapping ErrUnknownOnFull naming %v", what, of, out, err, of)
			}
		}
		out, err := h.PublishWith(ctx, 1, of)
		check("PublishWith", out, err)
		out, err = h.PublishWithHeaders(ctx, 1, topic.Headers{"k": "v"}, of)
		check("PublishWithHeaders", out, err)
		out, err = topic.Binding[int]{Handle: h, OnFull: of}.Publish(ctx, 1)
		check("Binding.Publish", out, err)
	}
	if st := h.Stats(); st.Published != 0 {
		t.Errorf("Stats.Published = %d after refused publishes, want 0", st.Published)
	}
}

// Guarantee: Bind on a nil *TopicSet (what config.Wired.TopicSet returns
// for a pipeline that is not wired) returns an error wrapping
// ErrNotCreated instead of panicking, and the set still reads as empty.
func TestBindOnANilTopicSetReturnsErrNotCreated(t *testing.T) {
	h := newIntTopic(t, topic.Options{})
	var s *topic.TopicSet[int]
	call(t, "Bind", func() {
		wantNotCreated(t, "Bind on a nil TopicSet", s.Bind("out", topic.Binding[int]{Handle: h}))
	})
	if _, ok := s.Get("out"); ok {
		t.Error("Get on a nil TopicSet found an alias after Bind")
	}
}
