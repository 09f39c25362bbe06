package claim

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/telemetry"
)

// Guarantee: a claim's release ends the batchers' early emission however
// its wait ends (every record handled, RevokeTimeout, hurry): once Release
// has returned, a message of another feed waits in its open batch for
// BatchTimeout again instead of being emitted with its chunk.
func TestReleaseEndsTheEarlyEmissionOnEveryExit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		block bool // the batch handler holds the claim's records
		hurry bool
	}{
		{"every record handled", false, false},
		{"timeout", true, false},
		{"hurry", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { releaseEndsEarlyEmission(t, tc.block, tc.hurry) })
		})
	}
}

func releaseEndsEarlyEmission(t *testing.T, block, hurry bool) {
	c := New(Config{Topic: "t", Window: 8})
	other := make(chan *producer.Feed[[]byte], 1)
	src := producer.SourceFunc[[]byte](func(ctx context.Context, stage *producer.Stage[[]byte]) error {
		c.Open(stage)
		other <- stage.NewFeed("other", nil)
		<-ctx.Done()
		return nil
	})
	unblock := make(chan struct{})
	var mu sync.Mutex
	var emitted []message.Trigger
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:     "release-ends",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[[]byte]{Source: src},
		Processors: processor.Options[[]byte, []byte]{
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) { return m.Data, nil },
		},
		Batchers: []batcher.Options[[]byte]{{
			Name: message.DefaultBatcher, BatchSize: 100, BatchTimeout: time.Hour, Concurrency: 2,
			Handle: func(_ context.Context, batch []*message.Message[[]byte], _ message.BatchInfo) error {
				if _, ok := message.MetadataAs[*Metadata](batch[0]); ok && block {
					<-unblock
				}
				return nil
			},
		}},
		Telemetry: &telemetry.Hooks{BatchEmit: func(_ context.Context, e telemetry.Batch) {
			mu.Lock()
			emitted = append(emitted, e.Info.Trigger)
			mu.Unlock()
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	f := <-other
	emits := func() int {
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		return len(emitted)
	}
	if got := c.Take(3); got != 3 {
		t.Fatalf("the claim holds %d permits, want 3", got)
	}
	Deliver(c, []int64{0, 1, 2}, func(o int64) Record { return Record{Offset: o, Value: []byte("v")} },
		func(dst []Header, _ int64) []Header { return dst })
	if n := emits(); n != 0 {
		t.Fatalf("%d batches emitted before the release", n)
	}
	hurryCh := make(chan struct{})
	released := make(chan struct{})
	go func() {
		defer close(released)
		c.Release(c.log, time.Second, hurryCh)
	}()
	if n := emits(); n != 1 {
		t.Fatalf("%d batches emitted once the release began, want the claim's open one", n)
	}
	if hurry {
		close(hurryCh)
	}
	<-released
	if block && c.Pending() == 0 {
		t.Fatal("test setup: the release did not end with records in flight")
	}
	if _, err := f.Acquire(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	rec := acker.NewRecorder(false)
	f.Deliver(message.New([]byte("x"), rec, 0))
	if n := emits(); n != 1 {
		t.Errorf("%d batches emitted once the release had returned, want the other feed's message to wait in its open batch", n)
	}
	close(unblock)
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rec.Total(); got != 1 {
		t.Errorf("the other feed's message has %d outcomes, want 1", got)
	}
}
