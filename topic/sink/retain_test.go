package sink_test

import (
	"testing"
	"weak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

// payload stands for a user's message body, not a tiny allocation.
type payload struct {
	n int
	_ [1 << 10]byte
}

// Guarantee: a tracked sink keeps none of the values it published once
// their downstream outcomes were reported upstream, whether published one
// by one or in batches, acked or nacked downstream: neither its pending
// publishes nor the tracked publisher's table of them hold the values.
func TestATrackedSinkKeepsNoValueOnceItsOutcomeIsReported(t *testing.T) {
	const n, batch = 256, 32
	h, err := topic.NewTopic[*payload]("t", autoOpts(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	sub, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	s, err := sink.New(sink.Options[*payload]{Binding: topic.Binding[*payload]{Handle: h, AckPropagation: h.Options().AckPropagation}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	rec := acker.NewRecorder(false)
	ws := make([]weak.Pointer[payload], n)
	publish := func(i int) *message.Message[*payload] {
		p := &payload{n: i}
		ws[i] = weak.Make(p)
		return message.New(p, rec, uint64(i))
	}
	for i := 0; i < n; i += batch {
		if i%(2*batch) == 0 {
			for j := i; j < i+batch; j++ {
				if err := s.Publish(ctxT(t), publish(j)); err != nil {
					t.Fatal(err)
				}
			}
		} else {
			msgs := make([]*message.Message[*payload], batch)
			for j := range msgs {
				msgs[j] = publish(i + j)
			}
			if err := s.PublishBatch(ctxT(t), msgs); err != nil {
				t.Fatal(err)
			}
		}
		for range batch {
			it, err := sub.Receive(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if it.Value.n%3 == 0 {
				err = sub.Nack(it.ID, nil)
			} else {
				err = sub.Ack(it.ID)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := rec.Wait(ctxT(t), n); err != nil {
		t.Fatalf("upstream outcomes never reported: %v", err)
	}
	if live := wait.Reachable(ws); live > 0 {
		t.Errorf("%d of %d values still reachable from the sink after their outcomes were reported", live, n)
	}
}
