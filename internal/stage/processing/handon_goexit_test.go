package processing_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/stage/batching"
	"github.com/boulevard-go/boulevard/internal/stage/processing"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
)

// Guarantee: when a batcher's PartitionBy ends the processor's goroutine
// (runtime.Goexit, as t.FailNow does) while the processor hands its chunk
// on, the messages of that chunk not handed on yet (to that batcher, and
// to the batchers after it) fail with message.ErrHandlerExited and are
// reported once by the processor, those handed on before are the
// batcher's, the exit is logged once, another processor takes over, and
// the later messages are handled; every message reaches its acknowledger
// once and the stages drain.
func TestBatcherPartitionByGoexitFailsMessagesNotHandedOn(t *testing.T) {
	rec := acker.NewRecorder(false)
	log := &logtest.Records{}
	// Batcher "a" gets the odd messages, partitioned by a key whose
	// function exits on message 3; "b" gets the even ones.
	a := batching.New(batcher.Options[int]{
		Name: "a", BatchSize: 1, Concurrency: 2, BatchTimeout: time.Hour,
		PartitionBy: func(m *message.Message[int]) string {
			if m.Data == 3 {
				runtime.Goexit()
			}
			return strconv.Itoa(m.Data)
		},
		Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil },
	}.WithDefaults(), batching.Config{Name: t.Name()})
	b := &fakeRoute[int]{}
	bctx, bcancel := context.WithCancel(context.Background())
	defer bcancel()
	adone := stagetest.Go(bctx, a)
	opts := processor.Options[int, int]{Concurrency: 1, MaxDemand: 10,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			if m.Data%2 == 0 {
				m.SetBatcher("b")
			} else {
				m.SetBatcher("a")
			}
			return m.Data, nil
		}}
	s := processing.New(opts.WithDefaults(), processing.Config[int]{Name: t.Name(), Logger: slog.New(log),
		Routes: []processing.NamedRoute[int]{{Name: "a", Route: a}, {Name: "b", Route: ackingRoute{b}}}})
	run(t, s)
	publish(t, s, ints(rec, 0, 30))
	waitAcks(t, rec, 30)
	if got := s.Running(); len(got) != 1 {
		t.Errorf("processors running after the exit: %v, want the one configured", got)
	}
	publish(t, s, ints(rec, 30, 10))
	waitAcks(t, rec, 40)
	drain(t, s)
	a.CloseInput()
	waitDone(t, adone, "the batcher to drain")
	assertOnce(t, rec, seq(0, 40))
	failed3 := false
	for _, o := range rec.Failed() {
		failed3 = failed3 || o.ID == 3
		if !errors.Is(o.Err, message.ErrHandlerExited) || o.ID >= 30 {
			t.Errorf("message %d failed with %v; want only messages of the first publish, with message.ErrHandlerExited", o.ID, o.Err)
		}
	}
	if !failed3 {
		t.Error("message 3, whose PartitionBy exited, did not fail")
	}
	for _, m := range b.routed() {
		if m.Failed() {
			t.Errorf("message %d was handed on to batcher b and failed too: %v", m.Data, m.Err())
		}
	}
	if n := log.Count(slog.LevelError, processing.ExitedLog); n != 1 {
		t.Errorf("%d log lines %q, want 1", n, processing.ExitedLog)
	}
	st := s.Stats(0)
	if st.In != 40 || st.Failed.Total() != uint64(rec.FailedCount()) || st.Succeeded+st.Failed.Total() != 40 {
		t.Errorf("Stats: In %d, Succeeded %d, Failed %d; want 40 in, %d failed", st.In, st.Succeeded, st.Failed.Total(), rec.FailedCount())
	}
}
