package topic_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a publish waiting for room in a full group (a balanced-only
// or a mixed topic) does not wait for ever on consumers that never come:
// it returns ErrTopicClosed when the topic closes, publishes once the
// group's last member leaves (the group is gone), and returns ctx.Err()
// when its context ends.
func TestAPublishWaitingForAFullGroupEnds(t *testing.T) {
	ends := map[string]struct {
		end  func(h *topic.Handle[int], member *topic.Subscription[int], cancel context.CancelFunc)
		want error
	}{
		"the topic closes":               {end: func(h *topic.Handle[int], _ *topic.Subscription[int], _ context.CancelFunc) { h.Close() }, want: topic.ErrTopicClosed},
		"the group's last member leaves": {end: func(_ *topic.Handle[int], m *topic.Subscription[int], _ context.CancelFunc) { m.Close() }},
		"its context ends":               {end: func(_ *topic.Handle[int], _ *topic.Subscription[int], cancel context.CancelFunc) { cancel() }, want: context.Canceled},
	}
	for _, mode := range []topic.Mode{topic.BalancedOnly, topic.Mixed} {
		for name, e := range ends {
			t.Run(mode.String()+"/"+name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h := newIntTopic(t, topic.Options{Mode: mode, Balanced: topic.BalancedPolicy{Capacity: 1}})
					member := subscribeInt(t, h, topic.Balanced("g"))
					if err := h.Publish(t.Context(), 1); err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithCancel(t.Context())
					defer cancel()
					done := make(chan error, 1)
					go func() { done <- h.Publish(ctx, 2) }()
					synctest.Wait() // the publish waits for room in the full group
					select {
					case err := <-done:
						t.Fatalf("Publish into a full group returned %v at once, want it to wait", err)
					default:
					}
					e.end(h, member, cancel)
					synctest.Wait()
					select {
					case err := <-done:
						if !errors.Is(err, e.want) || (e.want == nil && err != nil) {
							t.Fatalf("waiting Publish returned %v once %s, want %v", err, name, e.want)
						}
					default:
						t.Fatalf("Publish still waits for room once %s", name)
					}
				})
			})
		}
	}
}
