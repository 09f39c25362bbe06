package sink_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

// countAcker counts outcomes without keeping them.
type countAcker struct{ ok, failed atomic.Int64 }

func (c *countAcker) Ack(_ context.Context, s, f []acker.Outcome) {
	c.ok.Add(int64(len(s)))
	c.failed.Add(int64(len(f)))
}

// benchSink measures one message's hop through a sink: publish, receive,
// ack on the subscription, outcome reported upstream (tracked), or publish
// and receive (untracked).
func benchSink(b *testing.B, mode topic.PropagationMode) {
	h, err := topic.NewTopic[int]("t", topic.Options{AckPropagation: topic.AckPropagation{Mode: mode}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	sub, err := h.Subscribe(b.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	o := h.Options()
	s, err := sink.New(sink.Options[int]{Binding: topic.Binding[int]{Handle: h, AckPropagation: o.AckPropagation}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	up := &countAcker{}
	ctx := context.Background()
	var m message.Message[int]
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		m.Init(i, up, uint64(i))
		if err := s.Publish(ctx, &m); err != nil {
			b.Fatal(err)
		}
		it, err := sub.Receive(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if mode == topic.PropagationAuto {
			if err := sub.Ack(it.ID); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	if mode == topic.PropagationAuto && up.ok.Load() != int64(b.N) {
		b.Fatalf("%d outcomes for %d messages", up.ok.Load(), b.N)
	}
}

func BenchmarkSinkTracked(b *testing.B)   { benchSink(b, topic.PropagationAuto) }
func BenchmarkSinkUntracked(b *testing.B) { benchSink(b, topic.PropagationDisabled) }
