package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
)

// outcomeTally counts, by message ID, the outcomes its acknowledgers get.
type outcomeTally struct {
	mu     sync.Mutex
	counts map[uint64]int
	failed map[uint64]error
}

func (t *outcomeTally) add(successful, failed []acker.Outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range successful {
		t.counts[o.ID]++
	}
	for _, o := range failed {
		t.counts[o.ID]++
		t.failed[o.ID] = o.Err
	}
}

// valueAcker is an acknowledger passed by value whose values cannot be
// compared: it holds a slice.
type valueAcker struct {
	labels []string
	t      *outcomeTally
}

func (a valueAcker) Ack(_ context.Context, successful, failed []acker.Outcome) {
	a.t.add(successful, failed)
}

var errOdd = errors.New("odd message")

// Guarantee: messages whose acknowledger cannot be compared (a value
// holding a slice, against the Acknowledger contract's advice) do not
// crash the process: with and without batchers, each message's outcome
// reaches the acknowledger exactly once, a failure with its error.
func TestUncomparableAcknowledgerGetsEveryOutcomeOnce(t *testing.T) {
	for _, batchers := range []bool{false, true} {
		t.Run(fmt.Sprintf("batchers=%v", batchers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := pipeline.Options[uint64, uint64]{
					Name: "value-acker",
					Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
						if m.Data%2 == 1 {
							return 0, errOdd
						}
						return m.Data, nil
					}},
				}
				if batchers {
					o.Batchers = []batcher.Options[uint64]{{Name: "default", BatchSize: 3, BatchTimeout: time.Hour, Handle: batchOK}}
				}
				p := mustNew(t, o)
				if err := p.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				tally := &outcomeTally{counts: map[uint64]int{}, failed: map[uint64]error{}}
				const n = 40
				for i := range uint64(n) {
					// One acknowledger value per message, as a source that
					// builds them on the fly would.
					a := valueAcker{labels: []string{"partition-0"}, t: tally}
					if err := p.Push(context.Background(), message.New(i, a, i)); err != nil {
						t.Fatal(err)
					}
				}
				if err := p.Stop(context.Background()); err != nil {
					t.Fatalf("Stop: %v", err)
				}
				if len(tally.counts) != n {
					t.Fatalf("%d distinct messages acknowledged, want %d", len(tally.counts), n)
				}
				for id, c := range tally.counts {
					if c != 1 {
						t.Errorf("message %d acknowledged %d times, want once", id, c)
					}
					if err := tally.failed[id]; (id%2 == 1) != errors.Is(err, errOdd) {
						t.Errorf("message %d: failure %v", id, err)
					}
				}
			})
		})
	}
}

// panickingAcker records its calls, then panics.
type panickingAcker struct{ rec *acker.Recorder }

func (a *panickingAcker) Ack(ctx context.Context, successful, failed []acker.Outcome) {
	a.rec.Ack(ctx, successful, failed)
	panic("custom acknowledger broke")
}

// Guarantee: when TestOptions.Acknowledger panics, TestWith still returns
// as soon as every message's outcome has arrived, with every outcome, and
// its error says the custom acknowledger panicked (it wraps the
// *message.PanicError); it does not wait for its context to end.
func TestTestWithReturnsWhenTheCustomAcknowledgerPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:       "test-with-panicking-acker",
			Processors: processor.Options[uint64, uint64]{Concurrency: 1, Handle: identity},
			Batchers:   []batcher.Options[uint64]{{Name: "default", BatchSize: 2, BatchTimeout: time.Hour, Handle: batchOK}},
		})
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer p.Stop(context.Background())
		custom := &panickingAcker{rec: acker.NewRecorder(false)}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		begin := time.Now()
		r, err := p.TestWith(ctx, pipeline.TestOptions{Acknowledger: custom}, 1, 2, 3, 4)
		if took := time.Since(begin); took > 0 {
			t.Errorf("TestWith took %v: it waited for its context", took)
		}
		var pe *message.PanicError
		if !errors.As(err, &pe) || pe.Value != "custom acknowledger broke" || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("TestWith = %v, want an error wrapping the custom acknowledger's *message.PanicError", err)
		}
		if len(r.Outcomes) != 4 {
			t.Fatalf("%d outcomes, want 4", len(r.Outcomes))
		}
		for i, o := range r.Outcomes {
			if o.Acks != 1 || o.Err != nil || o.Data != uint64(i+1) {
				t.Errorf("outcome %d = %+v, want acknowledged once, successful", i, o)
			}
		}
		if custom.rec.Total() != 4 {
			t.Errorf("the custom acknowledger saw %d outcomes, want 4", custom.rec.Total())
		}
	})
}
