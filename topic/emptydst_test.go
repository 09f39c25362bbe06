package topic_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: ReceiveBatch given a dst of length 0 (nil or not) returns 0,
// ErrEmptyDst at once instead of panicking, consuming nothing, on an open
// subscription, a closed one and a zero one, whatever ctx.
func TestReceiveBatchIntoAnEmptyDstReturnsErrEmptyDst(t *testing.T) {
	h, err := topic.NewTopic[int]("t", topic.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	open, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	closed, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	if err := h.Publish(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(t.Context())
	cancel()
	subs := map[string]*topic.Subscription[int]{"open": open, "closed": closed, "zero": new(topic.Subscription[int])}
	for name, sub := range subs {
		for _, dst := range [][]topic.Item[int]{nil, {}} {
			for _, ctx := range []context.Context{t.Context(), done} {
				var n int
				func() {
					defer func() {
						if r := recover(); r != nil {
							err = fmt.Errorf("panicked: %v", r)
						}
					}()
					n, err = sub.ReceiveBatch(ctx, dst)
				}()
				if n != 0 || !errors.Is(err, topic.ErrEmptyDst) {
					t.Errorf("ReceiveBatch on the %s subscription into %#v: %d, %v; want 0, ErrEmptyDst", name, dst, n, err)
				}
			}
		}
	}
	if it, err := open.Receive(t.Context()); err != nil || it.Value != 1 {
		t.Errorf("Receive after the empty ReceiveBatch calls: %v, %v; want the value published, 1", it.Value, err)
	}
}
