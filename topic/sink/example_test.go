package sink_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

// With ack propagation auto, the upstream acknowledger learns the outcome
// the downstream subscriber gives.
func ExampleSink() {
	ctx := context.Background()
	h, _ := topic.NewTopic[string]("orders", topic.Options{
		AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto},
	}, nil)
	defer h.Close()
	sub, _ := h.Subscribe(ctx, topic.Balanced("workers"), topic.SubscriberOptions{})
	defer sub.Close()

	s, _ := sink.New(sink.Options[string]{Binding: topic.Binding[string]{Handle: h, AckPropagation: h.Options().AckPropagation}})
	defer s.Close()
	upstream := acker.Func(func(_ context.Context, ok, failed []acker.Outcome) {
		for _, o := range ok {
			fmt.Println("upstream: message", o.ID, "acked")
		}
		for _, o := range failed {
			fmt.Println("upstream: message", o.ID, "failed:", o.Err)
		}
	})
	for i, v := range []string{"book", "lamp"} {
		m := message.New(v, &upstream, uint64(i+1))
		_ = s.Publish(ctx, m) // m is deferred: the pipeline would not ack it
	}
	first, _ := sub.Receive(ctx)
	_ = sub.Ack(first.ID)
	second, _ := sub.Receive(ctx)
	_ = sub.Nack(second.ID, errors.New("out of stock"))
	// Output:
	// upstream: message 1 acked
	// upstream: message 2 failed: topic orders: downstream nacked: out of stock
}
