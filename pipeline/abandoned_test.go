package pipeline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: a producer stage's Abandoned channel tells the source's Close
// whether the pipeline left messages without an outcome: it is closed by
// then when the drain was cut short, and open when the drain completed; it
// is open while the pipeline runs, and while a handler the cut interrupted
// is still to report its outcome.
func TestStageAbandonedTellsCloseWhetherTheDrainWasCutShort(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stuck bool // the handler ignores the drain until its context ends
	}{{"drain completed", false}, {"drain cut short", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var stage *producer.Stage[uint64]
			running := make(chan struct{})
			atClose := make(chan bool, 1)
			src := &countingSource{
				run: func(ctx context.Context, st *producer.Stage[uint64], _ int) error {
					stage = st
					feed := st.NewFeed("f", nil)
					if _, err := feed.Acquire(ctx, 1); err == nil {
						feed.Deliver(message.New(uint64(1), acker.NewRecorder(false), 1))
					}
					<-ctx.Done()
					return nil
				},
				close: func() {
					select {
					case <-stage.Abandoned():
						atClose <- true
					default:
						atClose <- false
					}
				},
			}
			p := mustNew(t, pipeline.Options[uint64, uint64]{
				Name:            "abandoned",
				ShutdownTimeout: 200 * time.Millisecond,
				Producer:        producer.Options[uint64]{Source: src},
				Processors: processor.Options[uint64, uint64]{Concurrency: 1,
					Handle: func(ctx context.Context, m *message.Message[uint64]) (uint64, error) {
						close(running)
						if tc.stuck {
							<-ctx.Done()
							select {
							case <-stage.Abandoned():
								t.Error("Abandoned is closed before the interrupted handler returned")
							default:
							}
							return 0, ctx.Err()
						}
						return m.Data, nil
					}},
			})
			if err := p.Start(ctxT(t, 30*time.Second)); err != nil {
				t.Fatal(err)
			}
			<-running
			select {
			case <-stage.Abandoned():
				t.Fatal("Abandoned is closed while the pipeline runs")
			default:
			}
			err := p.Stop(ctxT(t, 30*time.Second))
			if tc.stuck != errors.Is(err, pipeline.ErrShutdownTimeout) {
				t.Fatalf("Stop = %v", err)
			}
			if got := <-atClose; got != tc.stuck {
				t.Errorf("Abandoned closed when the source's Close ran: %v, want %v", got, tc.stuck)
			}
		})
	}
}
