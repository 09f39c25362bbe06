package pipeline_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// partialFetchSource is a pull-model source whose fetches return fewer
// messages than it asks for: each fetch returns one in three of what the
// source may deliver (at least one, at most what is left). carry keeps the
// permits a fetch did not use, as Feed.Acquire's documentation shows;
// without it they are dropped.
func partialFetchSource(total int, carry bool, rec *acker.Recorder) *countingSource {
	return &countingSource{run: func(ctx context.Context, st *producer.Stage[uint64], _ int) error {
		feed := st.NewFeed("partial", nil)
		have, next := 0, 0
		for next < total {
			if have == 0 || !carry {
				n, err := feed.Acquire(ctx, 100)
				if err != nil {
					return nil
				}
				have = n
			}
			k := min(max(have/3, 1), total-next)
			msgs := make([]*message.Message[uint64], k)
			for i := range msgs {
				msgs[i] = message.New(uint64(next), rec, uint64(next))
				next++
			}
			feed.Deliver(msgs...)
			have -= k
		}
		<-ctx.Done()
		return nil
	}}
}

// Guarantee: a pull-model source that keeps the permits its fetches did
// not use delivers everything, with no warning; one that drops them, and
// so waits in Acquire for permits no delivered message will refill, is
// told so in one warning naming how many permits it holds.
func TestASourceHoldingUndeliveredPermitsIsWarnedOnce(t *testing.T) {
	for _, carry := range []bool{true, false} {
		name := map[bool]string{true: "keeps the rest", false: "drops the rest"}[carry]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const total = 1000
				var lines logtest.Lines
				rec := acker.NewRecorder(false)
				p := mustNew(t, pipeline.Options[uint64, uint64]{
					Name:       "partial",
					Logger:     slog.New(slog.NewTextHandler(&lines, nil)),
					Producer:   producer.Options[uint64]{Source: partialFetchSource(total, carry, rec), Flow: producer.Flow{Initial: 100, Threshold: 50, Refill: 50}},
					Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: identity},
				})
				ctx := context.Background()
				if err := p.Start(ctx); err != nil {
					t.Fatal(err)
				}
				stopped := false
				t.Cleanup(func() {
					if !stopped {
						_ = p.Stop(ctx)
					}
				})
				synctest.Wait() // the source delivered all it could, and waits
				held := lines.Matching(producer.HeldPermitsLog)
				if carry {
					if rec.Total() != total || len(held) > 0 {
						t.Fatalf("%d of %d messages handled, %d warnings (first: %s)", rec.Total(), total, len(held), first(held))
					}
				} else {
					// 100 taken, 33 delivered: 67 held, above the threshold.
					if rec.Total() != 33 || len(held) != 1 || !strings.Contains(held[0], "held=67") || !strings.Contains(held[0], "feed=partial") {
						t.Fatalf("%d messages handled, warnings %q; want 33 and one warning with held=67", rec.Total(), held)
					}
				}
				stopped = true
				if err := p.Stop(ctx); err != nil {
					t.Fatalf("Stop: %v", err)
				}
			})
		})
	}
}
