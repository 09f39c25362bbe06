package pulsartopic_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// Guarantee: a pipeline reading a Pulsar topic through topic/source settles
// each message with the broker: a handled message is acked (the group's
// backlog empties) and a failed one is nacked and handled again.
func TestSourceSettlesWithBroker(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	h := newHandle(t, be, "in", topic.Options{})
	src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("readers"), Logger: testbroker.PulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	const n, failing = 50, 7
	var mu sync.Mutex
	handled := make(map[int]int)
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:     "from-pulsar",
		Logger:   testbroker.PulsarLogger(),
		Producer: producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			handled[m.Data]++
			if m.Data == failing && handled[m.Data] == 1 {
				return 0, errors.New("first attempt fails")
			}
			return m.Data, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := h.Publish(ctxT(t), i); err != nil {
			t.Fatal(err)
		}
	}
	wait.Within(t, patience, "every message handled and acked on the broker", func() bool {
		mu.Lock()
		all := len(handled) == n && handled[failing] >= 2
		mu.Unlock()
		return all && b.Backlog(be.TopicName("in"), "readers") == 0
	})
	if err := p.Stop(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for v, k := range handled {
		if k != 1 && v != failing {
			t.Fatalf("message %d handled %d times", v, k)
		}
	}
}
