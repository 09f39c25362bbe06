package source_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/topic/sink"
	"github.com/boulevard-go/boulevard/topic/source"
)

// defaultChainMessages is the load of TestChainUnderLoad unless
// BOULEVARD_TOPIC_MESSAGES asks for another.
const defaultChainMessages = 3000

// chainMessages is the load of TestChainUnderLoad: 3000 by default, more
// with BOULEVARD_TOPIC_MESSAGES.
func chainMessages() int {
	if v, err := strconv.Atoi(os.Getenv("BOULEVARD_TOPIC_MESSAGES")); err == nil && v > 0 {
		return v
	}
	return defaultChainMessages
}

// chainWait is the bound on the outcomes of n messages: wait.Deadline for
// each default load's worth, a larger load taking longer.
func chainWait(n int) time.Duration {
	return wait.Deadline * time.Duration(max(1, (n+defaultChainMessages-1)/defaultChainMessages))
}

var (
	errB = errors.New("rejected by b")
	errD = errors.New("rejected by d")
)

// Across two hops under concurrency (a → t1 balanced → b with three group
// members → t2 broadcast ack_mode all → c and d), every message of a's
// source gets exactly one outcome, it fails exactly when b or d failed it,
// with that pipeline's error, and stopping upstream first leaves nothing in
// flight.
func TestChainUnderLoad(t *testing.T) {
	n := chainMessages()
	doc := []byte(`
topics:
  t1:
    policies:
      balanced: {queue_capacity: 32}
      ack_propagation: {mode: auto, max_in_flight: 64}
  t2:
    policies:
      broadcast: {queue_capacity: 4096, on_lag: disconnect, ack_mode: all}
      ack_propagation: {mode: auto, max_in_flight: 128}
`)
	w := config.Wiring{Pipelines: []config.Pipeline{
		{Name: "a", Publishes: []config.Publish{{Topic: "t1"}}},
		{Name: "b", Subscribes: []config.Subscribe{{Topic: "t1"}}, Publishes: []config.Publish{{Topic: "t2"}}},
		{Name: "c", Subscribes: []config.Subscribe{{Topic: "t2", Mode: config.Broadcast}}},
		{Name: "d", Subscribes: []config.Subscribe{{Topic: "t2", Mode: config.Broadcast}}},
	}}
	broker := topic.NewBroker[int]()
	defer broker.Close()
	wired, err := config.Load(doc, w, broker)
	if err != nil {
		t.Fatal(err)
	}
	sourceFor := func(name string) *source.Source[int] {
		sub := wired.Subscriptions(name)[0]
		src, err := source.New(source.Options[int]{Topic: sub.Binding.Handle, Mode: sub.Mode})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	newSink := func(pipeline, alias string) *sink.Sink[int] {
		b, _ := wired.Publisher(pipeline, alias)
		s, err := sink.New(sink.Options[int]{Binding: b})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Started downstream first; stopped explicitly upstream first below.
	var pipelines []*pipeline.Pipeline[int, int]
	start := func(o pipeline.Options[int, int]) {
		o.ShutdownTimeout = deadline
		p, err := pipeline.New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		pipelines = append(pipelines, p)
	}
	for _, name := range []string{"c", "d"} {
		start(pipeline.Options[int, int]{
			Name:     name,
			Producer: producer.Options[int]{Source: sourceFor(name), Concurrency: 2},
			Processors: processor.Options[int, int]{Concurrency: 3, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				if name == "d" && m.Data%31 == 5 {
					return 0, fmt.Errorf("%d: %w", m.Data, errD)
				}
				return m.Data, nil
			}},
		})
	}
	t2 := newSink("b", "t2")
	start(pipeline.Options[int, int]{
		Name:     "b",
		Drainers: []pipeline.Drainer{t2},
		Producer: producer.Options[int]{Source: sourceFor("b"), Concurrency: 3},
		Processors: processor.Options[int, int]{Concurrency: 3, Handle: func(ctx context.Context, m *message.Message[int]) (int, error) {
			if m.Data%17 == 3 {
				return 0, fmt.Errorf("%d: %w", m.Data, errB)
			}
			return m.Data, t2.Publish(ctx, m)
		}},
	})
	rec := acker.NewRecorder(false)
	t1 := newSink("a", "t1")
	start(pipeline.Options[int, int]{
		Name:       "a",
		Drainers:   []pipeline.Drainer{t1},
		Producer:   producer.Options[int]{Source: &listSource{n: n, ack: rec}},
		Processors: processor.Options[int, int]{Concurrency: 4, Handle: t1.Handler()},
	})
	wait.Within(t, chainWait(n), "a's outcomes", func() bool { return rec.Total() >= n })
	for i := len(pipelines) - 1; i >= 0; i-- {
		stop(t, pipelines[i])
	}

	counts := rec.Counts()
	if len(counts) != n || rec.Total() != n {
		t.Fatalf("%d outcomes for %d distinct messages, want %d each once", rec.Total(), len(counts), n)
	}
	failed := map[uint64]error{}
	for _, o := range rec.Failed() {
		failed[o.ID] = o.Err
	}
	for v := range n {
		err, bad := failed[uint64(v)]
		switch {
		case v%17 == 3:
			if !bad || !errors.Is(err, errB) || !errors.Is(err, sink.ErrNacked) {
				t.Fatalf("message %d: %v, want b's rejection", v, err)
			}
		case v%31 == 5:
			if !bad || !errors.Is(err, errD) {
				t.Fatalf("message %d: %v, want d's rejection through both hops", v, err)
			}
		default:
			if bad {
				t.Fatalf("message %d failed: %v", v, err)
			}
		}
	}
	for _, name := range []topic.Name{"t1", "t2"} {
		if st := wired.Topics[name].Stats(); st.InFlight != 0 {
			t.Fatalf("topic %s stats after the drain: %+v", name, st)
		}
	}
}
