package source_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/producer/sourcetest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// The topic source passes the source conformance suite on an in-memory
// topic: one balanced group (one feed per member), every message published
// tracked. The fixture plays the upstream a topic relies on: a publish that
// resolves Acked is settled; one that resolves Nacked (the group's last
// member left with the message still queued, or the message was
// interrupted by a shutdown) is published again once a source subscribes,
// as an upstream pipeline's sink has its own source redeliver it.
func TestConformance(t *testing.T) {
	sourcetest.Run(t, sourcetest.Harness[int]{
		Start: func(t testing.TB, n int) sourcetest.Fixture[int] {
			opts := topic.Options{Balanced: topic.BalancedPolicy{Capacity: n}}
			opts.AckPropagation.Mode = topic.PropagationAuto
			h, err := topic.NewTopic[int]("conformance", opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(h.Close)
			pub, err := h.Tracked(topic.TrackedOptions{MaxInFlight: n, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pub.Close)
			up := &redeliverer{pub: pub}
			var (
				mu      sync.Mutex
				sources []*source.Source[int]
			)
			fail := &sourcetest.Failing[int]{}
			return sourcetest.Fixture[int]{
				NewSource: func() (producer.Source[int], error) {
					src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("g")})
					if err != nil {
						return nil, err
					}
					mu.Lock()
					sources = append(sources, src)
					mu.Unlock()
					// Subscribed: what the topic dropped can be delivered now.
					if err := up.redeliver(context.Background()); err != nil {
						return nil, err
					}
					return fail.Wrap(src), nil
				},
				Publish: func(ctx context.Context) ([]string, error) {
					keys := make([]string, n)
					for i := range n {
						keys[i] = strconv.Itoa(i)
						if err := up.publish(ctx, i); err != nil {
							return nil, err
						}
					}
					return keys, nil
				},
				Key:     func(m *message.Message[int]) string { return strconv.Itoa(m.Data) },
				Settled: up.settled,
				Fail:    fail.Fail,
				// The in-memory topic counts nothing per group: what its
				// subscriptions handed out is what the sources received.
				Fetched: func(context.Context) (int, error) {
					mu.Lock()
					defer mu.Unlock()
					n := 0
					for _, src := range sources {
						n += int(src.Stats().Received)
					}
					return n, nil
				},
			}
		},
	})
}

// redeliverer publishes tracked and keeps what the topic nacked for
// redelivery.
type redeliverer struct {
	pub    *topic.TrackedPublisher[int]
	mu     sync.Mutex
	acked  int
	nacked []int
}

func (u *redeliverer) publish(ctx context.Context, v int) error {
	return u.pub.PublishFunc(ctx, v, func(r topic.Result) {
		u.mu.Lock()
		defer u.mu.Unlock()
		if r.Outcome == topic.Acked {
			u.acked++
		} else {
			u.nacked = append(u.nacked, v)
		}
	})
}

func (u *redeliverer) redeliver(ctx context.Context) error {
	u.mu.Lock()
	vs := u.nacked
	u.nacked = nil
	u.mu.Unlock()
	for _, v := range vs {
		if err := u.publish(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

func (u *redeliverer) settled(context.Context) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.acked, nil
}
