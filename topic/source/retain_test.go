package source_test

import (
	"context"
	"sync/atomic"
	"testing"
	"weak"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// payload stands for a user's message body, not a tiny allocation.
type payload struct {
	n int
	_ [1 << 10]byte
}

// Guarantee: a running topic source keeps none of the values it received
// once their messages are handled and settled: the buffer it receives into
// lets go of them, so a burst of large values is not kept alive until the
// next burst overwrites it.
func TestARunningTopicSourceKeepsNoHandledValue(t *testing.T) {
	const n = 500
	for name, c := range map[string]struct {
		kind topic.Mode
		mode topic.SubscriptionMode
	}{
		"balanced":  {topic.BalancedOnly, topic.Balanced("g")},
		"broadcast": {topic.BroadcastOnly, topic.Broadcast()},
	} {
		t.Run(name, func(t *testing.T) {
			h, err := topic.NewTopic[*payload]("retain", topic.Options{Mode: c.kind}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(h.Close)
			src, err := source.New(source.Options[*payload]{Topic: h, Mode: c.mode, MaxBatch: 64})
			if err != nil {
				t.Fatal(err)
			}
			var handled atomic.Int64
			run(t, pipeline.Options[*payload, *payload]{
				Name:     "retain",
				Producer: producer.Options[*payload]{Source: src},
				Processors: processor.Options[*payload, *payload]{Handle: func(_ context.Context, m *message.Message[*payload]) (*payload, error) {
					handled.Add(1)
					return m.Data, nil
				}},
			})
			wait.For(t, "the source subscribed", func() bool {
				st := h.Stats()
				return st.BalancedGroups+st.BroadcastSubscribers > 0
			})
			ws := make([]weak.Pointer[payload], n)
			for i := range n {
				p := &payload{n: i}
				ws[i] = weak.Make(p)
				if err := h.Publish(context.Background(), p); err != nil {
					t.Fatal(err)
				}
			}
			wait.For(t, "every message handled", func() bool { return handled.Load() == n })
			if live := wait.Reachable(ws); live > 0 {
				t.Errorf("%d of %d values still reachable from the running source after they were handled", live, n)
			}
		})
	}
}
