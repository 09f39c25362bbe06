package observe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: the health and readiness checks, /stats and a scrape never
// wait on user code: while the processors' PartitionBy blocks inside a
// delivery that goes straight to them (on the source's goroutine), a
// running pipeline is healthy and ready, its snapshot is read (nothing
// failed) and its metrics are gathered.
func TestChecksAndScrapesDoNotWaitForABlockedPartitionBy(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce, once sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name: "statsblock",
		Producer: producer.Options[int]{Source: producer.SourceFunc[int](func(ctx context.Context, st *producer.Stage[int]) error {
			feed := st.NewFeed("blocked", nil)
			if _, err := feed.Acquire(ctx, 1); err != nil {
				return nil
			}
			feed.Deliver(message.New(0, acker.Discard, 0))
			<-ctx.Done()
			return nil
		})},
		Processors: processor.Options[int, int]{
			Concurrency: 2,
			Handle:      func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil },
			PartitionBy: func(*message.Message[int]) string {
				once.Do(func() {
					close(entered)
					<-release
				})
				return "k"
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	obs := observe.New(observe.Options{StatsTimeout: 2 * time.Second})
	add(t, obs, p)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unblock()
		if err := p.Stop(context.Background()); err != nil {
			t.Errorf("Stop = %v", err)
		}
	})
	<-entered

	ctx := t.Context()
	for name, reps := range map[string][]observe.PipelineReport{"Health": obs.Health(ctx), "Readiness": obs.Readiness(ctx)} {
		if len(reps) != 1 || !reps[0].OK {
			t.Errorf("%s = %+v while PartitionBy blocks, want the pipeline OK", name, reps)
		}
	}
	snap := obs.Snapshot(ctx)
	if len(snap.Failed) != 0 || len(snap.Pipelines) != 1 {
		t.Errorf("Snapshot failed %q with %d pipelines while PartitionBy blocks, want none failed and 1 pipeline", snap.Failed, len(snap.Pipelines))
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(obs)
	labels := map[string]string{"pipeline": "statsblock", "stage": "statsblock.producer.0"}
	if got, ok := find(t, reg, "boulevard_producer_buffered_messages", labels); !ok || got != 0 {
		t.Errorf("boulevard_producer_buffered_messages = %v (found %v) while PartitionBy blocks, want 0", got, ok)
	}

	unblock()
	wait.For(t, "the message handled once PartitionBy returns", func() bool { return p.Stats().Processors.Succeeded == 1 })
}
