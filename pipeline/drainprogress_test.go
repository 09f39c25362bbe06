package pipeline_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: a stop that waits on a slow handler says so while it waits:
// 5 s into the drain, and then at doubling intervals (at most a minute
// apart), an INFO line says how long the drain has run, how long before
// it is cut short and how many messages the processors still hold; none
// once the drain is done.
func TestASlowDrainSaysWhatItWaitsFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		release := make(chan struct{})
		var once sync.Once
		free := func() { once.Do(func() { close(release) }) }
		defer free() // a failed check lets the drain end
		entered := make(chan struct{}, 1)
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "slow",
			Logger:          slog.New(slog.NewTextHandler(&lines, nil)),
			ShutdownTimeout: 5 * time.Minute,
			Processors: processor.Options[uint64, uint64]{Concurrency: 1, Handle: func(ctx context.Context, m *message.Message[uint64]) (uint64, error) {
				entered <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
				}
				return m.Data, nil
			}},
		})
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		rec := acker.NewRecorder(false)
		if err := p.Push(t.Context(), message.New(uint64(1), rec, 1)); err != nil {
			t.Fatal(err)
		}
		<-entered
		stopped := make(chan error, 1)
		go func() { stopped <- p.Stop(context.Background()) }()
		synctest.Wait()
		time.Sleep(5*time.Second - time.Nanosecond)
		synctest.Wait()
		if got := lines.Matching("pipeline still draining"); len(got) != 0 {
			t.Fatalf("before 5 s: %q", got)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		got := lines.Matching("pipeline still draining")
		if len(got) != 1 || !strings.Contains(got[0], "level=INFO") || !strings.Contains(got[0], "for=5s") ||
			!strings.Contains(got[0], "cut_short_in=4m55s") || !strings.Contains(got[0], "processors_queued=0 processors_in_flight=1") {
			t.Fatalf("5 s into the drain: %q, want one INFO line with the time spent, the time left and the message in flight", got)
		}
		time.Sleep(10 * time.Second) // the next line comes twice as long after the first
		synctest.Wait()
		if got := lines.Matching("pipeline still draining"); len(got) != 2 || !strings.Contains(got[1], "for=15s") {
			t.Fatalf("15 s into the drain: %q, want a second line", got)
		}
		// Then 35 s and 75 s in, and a minute later rather than twice 40 s.
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := lines.Matching("pipeline still draining"); len(got) != 5 || !strings.Contains(got[4], "for=2m15s") {
			t.Fatalf("2m15s into the drain: %q, want five lines, the last a minute after the one 75 s in", got)
		}
		free()
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		if got := lines.Matching("pipeline still draining"); len(got) != 5 {
			t.Fatalf("after the drain: %q, want no more lines", got)
		}
	})
}

// Guarantee: a source's Close that takes its time is said in the log while
// the pipeline waits for it, at the same intervals as a slow drain.
func TestASlowSourceCloseIsSaidWhileThePipelineWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		src := &slowCloseSource{closeTakes: 12 * time.Second, ctxErr: make(chan error, 1)}
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:       "slow-close",
			Logger:     slog.New(slog.NewTextHandler(&lines, nil)),
			Producer:   producer.Options[uint64]{Source: src},
			Processors: processor.Options[uint64, uint64]{Handle: identity},
		})
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-src.ctxErr
		got := lines.Matching("pipeline still closing its source")
		if len(got) != 1 || !strings.Contains(got[0], "for=5s") {
			t.Fatalf("a Close of 12 s logged %q, want one line at 5 s (the next is due at 15 s)", got)
		}
	})
}
