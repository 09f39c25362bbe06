package sink_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

// reuseSource delivers the values 0..n-1 in messages it reuses once their
// outcome is reported, as the Kafka source does with its slots: a message
// belongs to its source again when its acknowledger has been called,
// unless it was deferred (see message.Message.Defer).
type reuseSource struct {
	producer.Basic
	n    int
	free chan *message.Message[int]

	mu       sync.Mutex
	outcomes map[uint64]int
	ok       int
	total    int
}

func newReuseSource(n, pool int) *reuseSource {
	// Room for every outcome, so that a duplicate one cannot block Ack.
	s := &reuseSource{n: n, free: make(chan *message.Message[int], pool+2*n), outcomes: map[uint64]int{}}
	for range pool {
		s.free <- new(message.Message[int])
	}
	return s
}

func (s *reuseSource) Run(ctx context.Context, st *producer.Stage[int]) error {
	feed := st.NewFeed("reuse", nil)
	for i := 0; i < s.n; {
		k, err := feed.Acquire(ctx, s.n-i)
		if err != nil {
			return nil
		}
		for range k {
			var m *message.Message[int]
			select {
			case m = <-s.free:
			case <-ctx.Done():
				return nil
			}
			m.Init(i, s, uint64(i))
			m.SetAckData(m)
			feed.Deliver(m)
			i++
		}
	}
	<-ctx.Done()
	return nil
}

func (s *reuseSource) Ack(_ context.Context, successful, failed []acker.Outcome) {
	s.mu.Lock()
	for _, o := range successful {
		s.outcomes[o.ID]++
		s.ok++
		s.total++
	}
	for _, o := range failed {
		s.outcomes[o.ID]++
		s.total++
	}
	s.mu.Unlock()
	for _, list := range [][]acker.Outcome{successful, failed} {
		for _, o := range list {
			if m := o.Data.(*message.Message[int]); m.Deferred() {
				s.free <- new(message.Message[int]) // the pipeline may still hold m
			} else {
				s.free <- m
			}
		}
	}
}

func (s *reuseSource) snapshot() (outcomes map[uint64]int, ok, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	outcomes = map[uint64]int{}
	for k, v := range s.outcomes {
		outcomes[k] = v
	}
	return outcomes, s.ok, s.total
}

// Guarantee: with ack propagation, a message's outcome may reach its
// source before the handler that published it has returned (here at once:
// the topic has no subscriber, so every publish is nacked inside Publish),
// and the message is deferred by then, so a source that reuses its
// messages keeps its hands off it. Every value gets exactly one outcome,
// and none a successful one (nothing was handled downstream).
func TestOutcomeBeforeTheHandlerReturnsFindsTheMessageDeferred(t *testing.T) {
	const n = 300
	h, err := topic.NewTopic[int]("t", autoOpts(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	o := h.Options()
	s, err := sink.New(sink.Options[int]{Binding: topic.Binding[int]{Handle: h, OnFull: topic.Block, AckPropagation: o.AckPropagation}})
	if err != nil {
		t.Fatal(err)
	}
	src := newReuseSource(n, 1)
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:            "a",
		ShutdownTimeout: 5 * time.Second,
		Drainers:        []pipeline.Drainer{s},
		Producer:        producer.Options[int]{Source: src},
		Processors:      processor.Options[int, int]{Concurrency: 1, Handle: s.Handler()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "an outcome per value", func() bool { _, _, total := src.snapshot(); return total >= n })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("stopping: %v", err)
	}
	outcomes, ok, total := src.snapshot()
	if ok != 0 {
		t.Errorf("%d values reported successful, though no subscriber handled any", ok)
	}
	if total != n {
		t.Errorf("%d outcomes for %d values", total, n)
	}
	for i := range uint64(n) {
		if outcomes[i] != 1 {
			t.Errorf("value %d: %d outcomes", i, outcomes[i])
		}
	}
}
