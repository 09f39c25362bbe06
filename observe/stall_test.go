package observe_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/prometheus/client_golang/prometheus"
)

// startHung starts a pipeline of opts and returns it with a registry of
// an Observer it was added to. Once the test has returned, free is
// called and the pipeline stopped.
func startHung(t *testing.T, opts pipeline.Options[int, int], free func()) (*pipeline.Pipeline[int, int], *prometheus.Registry) {
	t.Helper()
	p, err := pipeline.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	t.Cleanup(free) // before Stop
	obs := observe.New(observe.Options{})
	add(t, obs, p)
	return p, newRegistry(t, obs)
}

// Guarantee: how long the longest call of each stage has been running is
// exported while it runs, boulevard_processor_longest_call_seconds for a
// processor's chunk and boulevard_batcher_longest_call_seconds for a
// batch, and falls back to 0 once the call returned.
func TestLongestCallsAreExportedWhileTheyRun(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	entered := make(chan struct{})
	p, reg := startHung(t, pipeline.Options[int, int]{
		Name:               "hung",
		StallCheckInterval: pipeline.MinStallCheckInterval,
		Processors: processor.Options[int, int]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			if m.Data == 1 {
				close(entered)
				<-release
			}
			return m.Data, nil
		}},
		Batchers: []batcher.Options[int]{{Name: "default", BatchSize: 1,
			Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error {
				<-release
				return nil
			}}},
	}, free)
	rec := acker.NewRecorder(false)
	push(t, p, rec, 1, 1) // stalls in a processor
	<-entered
	push(t, p, rec, 2, 1) // in the other processor, then stalls in the batch handler
	gauges := []struct {
		name   string
		labels map[string]string
	}{
		{"boulevard_processor_longest_call_seconds", map[string]string{"pipeline": "hung"}},
		{"boulevard_batcher_longest_call_seconds", map[string]string{"pipeline": "hung", "batcher": "default"}},
	}
	values := func() string {
		var s string
		for _, g := range gauges {
			v, ok := find(t, reg, g.name, g.labels)
			s += fmt.Sprintf("%s = %v (found %v); ", g.name, v, ok)
		}
		return s
	}
	const atLeast = 0.1 // seconds, ten readings
	wait.For(t, "both stalled calls exported as running", func() bool {
		for _, g := range gauges {
			if v, ok := find(t, reg, g.name, g.labels); !ok || v < atLeast {
				return false
			}
		}
		return true
	}, values)
	free()
	wait.For(t, "both gauges back to 0 once the calls returned", func() bool {
		for _, g := range gauges {
			if v, _ := find(t, reg, g.name, g.labels); v != 0 {
				return false
			}
		}
		return rec.Total() == 2
	}, values)
}

// Guarantee: how long a producer stage's hand-over of delivered messages
// to the processors has been running their PartitionBy is exported while
// it runs, boulevard_producer_longest_handoff_seconds of the stage, and
// falls back to 0 once PartitionBy returned.
func TestABlockedPartitionByHandOffIsExportedWhileItRuns(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	entered := make(chan struct{}, 1)
	rec := acker.NewRecorder(false)
	src := producer.SourceFunc[int](func(ctx context.Context, st *producer.Stage[int]) error {
		feed := st.NewFeed("keys", nil)
		if _, err := feed.Acquire(ctx, 1); err != nil {
			return nil
		}
		feed.Deliver(message.New(1, rec, 1))
		<-ctx.Done()
		return nil
	})
	p, reg := startHung(t, pipeline.Options[int, int]{
		Name:     "keyed",
		Producer: producer.Options[int]{Source: src, Concurrency: 1},
		Processors: processor.Options[int, int]{Concurrency: 2,
			Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil },
			PartitionBy: func(*message.Message[int]) string {
				select {
				case entered <- struct{}{}:
				default:
				}
				<-release
				return "key"
			}},
	}, free)
	<-entered
	const name = "boulevard_producer_longest_handoff_seconds"
	labels := map[string]string{"pipeline": "keyed", "stage": p.Stats().Producers[0].Stage}
	value := func() string {
		v, ok := find(t, reg, name, labels)
		return fmt.Sprintf("%s %v = %v (found %v)", name, labels, v, ok)
	}
	const atLeast = 0.05 // seconds
	wait.For(t, "the blocked hand-over exported as running", func() bool {
		v, ok := find(t, reg, name, labels)
		return ok && v >= atLeast
	}, value)
	free()
	wait.For(t, "the gauge back to 0 once PartitionBy returned", func() bool {
		v, ok := find(t, reg, name, labels)
		return ok && v == 0 && rec.Total() == 1
	}, value)
}
