package pulsartopic_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

// sliceSource delivers values 0..n-1 under the stage's permits, each with
// ack as its acknowledger and its value as its id; Run returns once all
// are delivered.
func sliceSource(n int, ack acker.Acknowledger) producer.Source[int] {
	return producer.SourceFunc[int](func(ctx context.Context, stage *producer.Stage[int]) error {
		var mu sync.Mutex
		permits := 0
		wake := make(chan struct{}, 1)
		feed := stage.NewFeed("values", func(k int) {
			mu.Lock()
			permits += k
			mu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
		})
		for next := 0; next < n; {
			mu.Lock()
			k := min(permits, n-next)
			permits -= k
			mu.Unlock()
			if k == 0 {
				select {
				case <-wake:
					continue
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			for v := next; v < next+k; v++ {
				feed.Deliver(message.New(v, ack, uint64(v)))
			}
			next += k
		}
		return nil
	})
}

// runSinkPipeline runs a pipeline that publishes n values into h through a
// sink, upstream acknowledged by ack, until its source is exhausted.
func runSinkPipeline(t *testing.T, h *topic.Handle[int], n int, ack acker.Acknowledger) {
	t.Helper()
	s, err := sink.New(sink.Options[int]{Binding: topic.Binding[int]{Handle: h, OnFull: topic.Block}, Logger: testbroker.PulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:       "to-pulsar",
		Logger:     testbroker.PulsarLogger(),
		Producer:   producer.Options[int]{Source: sliceSource(n, ack)},
		Processors: processor.Options[int, int]{Concurrency: 4, Handle: s.Handler()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(ctxT(t)); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
}

// Guarantee: a pipeline publishing into a Pulsar topic through topic/sink
// acks each upstream message only once the broker has stored it, and every
// message reaches the topic's subscribers.
func TestSinkAcksUpstreamAfterBroker(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	h := newHandle(t, be, "out", topic.Options{})
	sub := subscribe(t, h, topic.Balanced("readers"))
	const n = 200
	var mu sync.Mutex
	acked := make(map[uint64]bool)
	var bad []string
	upstream := acker.Func(func(_ context.Context, ok, failed []acker.Outcome) {
		stored := make(map[int]bool)
		for _, m := range b.Messages(be.TopicName("out")) {
			v, _ := (topic.IntCodec{}).Decode(m.Payload)
			stored[v] = true
		}
		mu.Lock()
		defer mu.Unlock()
		for _, o := range ok {
			if !stored[int(o.ID)] && len(bad) < 5 {
				bad = append(bad, fmt.Sprintf("%d acked before the broker stored it", o.ID))
			}
			acked[o.ID] = true
		}
		for _, o := range failed {
			if len(bad) < 5 {
				bad = append(bad, fmt.Sprintf("%d failed: %v", o.ID, o.Err))
			}
		}
	})
	runSinkPipeline(t, h, n, &upstream)
	mu.Lock()
	if len(bad) > 0 || len(acked) != n {
		t.Fatalf("%d of %d acked upstream; problems: %v", len(acked), n, bad)
	}
	mu.Unlock()
	seen := make(map[int]bool)
	for len(seen) < n {
		it, err := sub.Receive(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		seen[it.Value] = true
		_ = sub.Ack(it.ID)
	}
}

// Guarantee: a message the sink could not publish (the topic is closed) is
// failed upstream, never acked.
func TestSinkFailsUpstreamWhenNotPublished(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	h := newHandle(t, be, "out", topic.Options{})
	h.Close()
	rec := acker.NewRecorder(false)
	runSinkPipeline(t, h, 10, rec)
	if len(rec.Successful()) != 0 || len(rec.Failed()) != 10 {
		t.Fatalf("%d acked, %d failed upstream; want all 10 failed", len(rec.Successful()), len(rec.Failed()))
	}
	for _, o := range rec.Failed() {
		if !errors.Is(o.Err, topic.ErrTopicClosed) {
			t.Fatalf("failure %v, want ErrTopicClosed", o.Err)
		}
	}
}
