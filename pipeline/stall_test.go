package pipeline_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// blocker is a handler's wait that a test releases once.
type blocker struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlocker() *blocker {
	return &blocker{entered: make(chan struct{}, 1), release: make(chan struct{})}
}

// wait blocks until the test releases it, whatever ctx says.
func (b *blocker) wait() {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
}

func (b *blocker) free() { b.once.Do(func() { close(b.release) }) }

// blockingAcker is an acknowledger whose Ack waits on its blocker.
type blockingAcker struct{ b *blocker }

func (a blockingAcker) Ack(context.Context, []acker.Outcome, []acker.Outcome) { a.b.wait() }

// startStalling starts a pipeline of opts whose processors' handler waits
// on b, logging to lines as text. Once the test has returned, b is freed
// and the pipeline stopped.
func startStalling(t *testing.T, opts pipeline.Options[uint64, uint64], b *blocker, lines *logtest.Lines) *pipeline.Pipeline[uint64, uint64] {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(lines, nil))
	opts.Processors.Handle = func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
		b.wait()
		return m.Data, nil
	}
	p := mustNew(t, opts)
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) }) // a failed check's way out
	t.Cleanup(b.free)                                      // before Stop
	return p
}

// stopWithoutStallLines frees b, stops p and checks that lines hold no
// stall line.
func stopWithoutStallLines(t *testing.T, p *pipeline.Pipeline[uint64, uint64], b *blocker, lines *logtest.Lines) {
	t.Helper()
	b.free()
	if err := p.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := lines.Matching("stall"); len(got) != 0 {
		t.Fatalf("%q, want no stall line", got)
	}
}

// checkStall runs a pipeline whose only message, acknowledged by ack,
// stalls in a handler or in ack for 70 s, and checks what longest (the stage's LongestCall in Stats) and the
// log say meanwhile: the age grows with the reading interval's
// resolution, one WARN line once it is past the threshold, one INFO line
// once the call returned.
func checkStall(t *testing.T, stage string, opts pipeline.Options[uint64, uint64], ack acker.Acknowledger, b *blocker,
	longest func(pipeline.Stats) time.Duration) {
	var lines logtest.Lines
	opts.Logger = slog.New(slog.NewTextHandler(&lines, nil))
	p := mustNew(t, opts)
	defer func() { _ = p.Stop(context.Background()) }() // a failed check's way out
	defer b.free()                                      // before Stop
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.Push(t.Context(), message.New(uint64(1), ack, 1)); err != nil {
		t.Fatal(err)
	}
	<-b.entered
	synctest.Wait()
	for _, at := range []time.Duration{10 * time.Second, 20 * time.Second} {
		time.Sleep(10 * time.Second)
		synctest.Wait()
		// Dated from the first reading that saw it, 1 s in at the latest.
		if got := longest(p.Stats()); got < at-time.Second || got > at {
			t.Fatalf("%v into the stall: LongestCall %v, want between %v and %v", at, got, at-time.Second, at)
		}
	}
	if got := lines.Matching(pipeline.StallLog); len(got) != 0 {
		t.Fatalf("20 s into a stall under a 30 s threshold: %q, want no line", got)
	}
	time.Sleep(50 * time.Second)
	synctest.Wait()
	if got := longest(p.Stats()); got < 69*time.Second {
		t.Fatalf("70 s into the stall: LongestCall %v, want at least 69s", got)
	}
	warned := lines.Matching(pipeline.StallLog)
	if len(warned) != 1 || !strings.Contains(warned[0], "level=WARN") || !strings.Contains(warned[0], "stage="+stage+" ") ||
		!strings.Contains(warned[0], "workers=1") || !strings.Contains(warned[0], "threshold=30s") {
		t.Fatalf("70 s into the stall: %q, want one WARN line of stage %s with one worker", warned, stage)
	}
	if got := lines.Matching(pipeline.StallEndedLog); len(got) != 0 {
		t.Fatalf("during the stall: %q", got)
	}
	b.free()
	synctest.Wait()
	time.Sleep(time.Second)
	synctest.Wait()
	ended := lines.Matching(pipeline.StallEndedLog)
	if len(ended) != 1 || !strings.Contains(ended[0], "level=INFO") || !strings.Contains(ended[0], "stage="+stage+" ") ||
		!strings.Contains(ended[0], "took=1m9s") {
		t.Fatalf("once the call returned: %q, want one INFO line of stage %s with took=1m9s", ended, stage)
	}
	if got := longest(p.Stats()); got != 0 {
		t.Fatalf("once the call returned: LongestCall %v, want 0", got)
	}
	if err := p.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := lines.Matching(pipeline.StallLog); len(got) != 1 {
		t.Fatalf("after the stall: %q, want still one WARN line", got)
	}
}

// Guarantee: a processor handler that stalls shows in Stats
// (Processors.LongestCall grows while it runs, 0 once it returned), and the
// processors log one WARN line once it has run longer than StallThreshold
// (however long it then runs) and one INFO line, with how long it took,
// once it returned.
func TestAStalledProcessorIsReportedWhileItRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBlocker()
		checkStall(t, "stalled.processor", pipeline.Options[uint64, uint64]{
			Name: "stalled",
			Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				b.wait()
				return m.Data, nil
			}},
		}, acker.NewRecorder(false), b, func(st pipeline.Stats) time.Duration { return st.Processors.LongestCall })
	})
}

// oneBatcher returns the options of a pipeline "stalled" whose batcher
// "default" takes batches of one message and whose batch handler calls
// handle.
func oneBatcher(handle func()) pipeline.Options[uint64, uint64] {
	return pipeline.Options[uint64, uint64]{
		Name:       "stalled",
		Processors: processor.Options[uint64, uint64]{Handle: identity},
		Batchers: []batcher.Options[uint64]{{Name: "default", BatchSize: 1, Concurrency: 2,
			Handle: func(context.Context, []*message.Message[uint64], message.BatchInfo) error {
				handle()
				return nil
			}}},
	}
}

// batcherLongest is the LongestCall of the pipeline's first batcher.
func batcherLongest(st pipeline.Stats) time.Duration { return st.Batchers[0].LongestCall }

// Guarantee: a batch handler that stalls shows in Stats
// (Batchers[].LongestCall) and in the log as a processor's does.
func TestAStalledBatchHandlerIsReportedWhileItRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBlocker()
		checkStall(t, "stalled.batcher.default", oneBatcher(func() { b.wait() }), acker.NewRecorder(false), b, batcherLongest)
	})
}

// Guarantee: a batch is in flight until its acknowledgers have returned,
// so an acknowledger that stalls after the batch handler returned shows in
// Stats (Batchers[].LongestCall) and in the log as a stalled batch
// handler does.
func TestAStalledBatchAcknowledgerIsReportedWhileItRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBlocker()
		checkStall(t, "stalled.batcher.default", oneBatcher(func() {}), blockingAcker{b}, b, batcherLongest)
	})
}

// Guarantee: a processor's chunk is in flight until its acknowledgers
// have returned, a chunk whose messages all failed too: an acknowledger
// that stalls on failed messages shows in Stats (Processors.LongestCall)
// and in the log.
func TestAStalledAcknowledgerOfFailedMessagesIsReportedWhileItRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBlocker()
		checkStall(t, "stalled.processor", pipeline.Options[uint64, uint64]{
			Name: "stalled",
			Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: func(context.Context, *message.Message[uint64]) (uint64, error) {
				return 0, errors.New("rejected")
			}},
		}, blockingAcker{b}, b, func(st pipeline.Stats) time.Duration { return st.Processors.LongestCall })
	})
}

// Guarantee: a negative StallCheckInterval turns the stall watch off: no
// goroutine of it runs (so nothing keeps a timer pending, and a
// testing/synctest bubble whose goroutines all wait is seen as
// deadlocked), no stall is logged, and LongestCall is dated by Stats calls
// alone.
func TestANegativeStallCheckIntervalRunsNoStallWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		b := newBlocker()
		p := startStalling(t, pipeline.Options[uint64, uint64]{Name: "unwatched", StallCheckInterval: -1}, b, &lines)
		synctest.Wait()
		buf := make([]byte, 1<<20)
		if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "watchStalls") {
			t.Fatalf("a stall watch runs with a negative StallCheckInterval:\n%s", stacks)
		}
		if err := p.Push(t.Context(), message.New(uint64(1), acker.NewRecorder(false), 1)); err != nil {
			t.Fatal(err)
		}
		<-b.entered
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := p.Stats().Processors.LongestCall; got != 0 {
			t.Fatalf("first Stats call an hour into the stall: LongestCall %v, want 0 (no reading saw the chunk before)", got)
		}
		time.Sleep(10 * time.Second)
		if got := p.Stats().Processors.LongestCall; got != 10*time.Second {
			t.Fatalf("10 s after the first Stats call: LongestCall %v, want 10s", got)
		}
		stopWithoutStallLines(t, p, b, &lines)
	})
}

// Guarantee: handlers that keep taking new work are not reported as
// stalled, however long the stages stay busy: a call is dated, not the
// time a worker has held one call after another.
func TestBusyHandlersAreNotReportedAsStalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		slow := func() { time.Sleep(300 * time.Millisecond) }
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:           "busy",
			Logger:         slog.New(slog.NewTextHandler(&lines, nil)),
			StallThreshold: 2 * time.Second,
			Processors: processor.Options[uint64, uint64]{Concurrency: 2, MaxDemand: 1, Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				slow()
				return m.Data, nil
			}},
			// Room for what the processors hand on, so that they never
			// wait for the batcher.
			Batchers: []batcher.Options[uint64]{{Name: "default", BatchSize: 1, Concurrency: 4,
				Handle: func(context.Context, []*message.Message[uint64], message.BatchInfo) error {
					slow()
					return nil
				}}},
		})
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.Stop(context.Background()) }() // a failed check's way out
		// 2 minutes of work for the processors.
		const messages = 800
		pushed := make(chan error, 1)
		go func() {
			rec := acker.NewRecorder(false)
			for i := range messages {
				if err := p.Push(t.Context(), message.New(uint64(i), rec, uint64(i))); err != nil {
					pushed <- err
					return
				}
			}
			pushed <- nil
		}()
		busy := 0
		time.Sleep(150 * time.Millisecond) // between two readings of the pipeline's own
		for i := range 110 {
			time.Sleep(time.Second)
			st := p.Stats()
			if st.Processors.InFlight > 0 && st.Batchers[0].InFlight > 0 {
				busy++
			}
			if st.Processors.LongestCall > time.Second || st.Batchers[0].LongestCall > time.Second {
				t.Fatalf("%v into the run: LongestCall %v (processors), %v (batcher), want at most the 1 s between two readings",
					time.Duration(i+1)*time.Second, st.Processors.LongestCall, st.Batchers[0].LongestCall)
			}
		}
		if busy < 100 {
			t.Fatalf("the stages were busy at %d readings of 110, want at least 100", busy)
		}
		if err := <-pushed; err != nil {
			t.Fatal(err)
		}
		if err := p.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := lines.Matching(pipeline.StallLog); len(got) != 0 {
			t.Fatalf("busy handlers logged %q, want no stall", got)
		}
	})
}

// Guarantee: a negative StallThreshold logs no stall, while Stats still
// dates the stalled call.
func TestANegativeStallThresholdLogsNoStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		b := newBlocker()
		p := startStalling(t, pipeline.Options[uint64, uint64]{Name: "quiet", StallThreshold: -1}, b, &lines)
		if err := p.Push(t.Context(), message.New(uint64(1), acker.NewRecorder(false), 1)); err != nil {
			t.Fatal(err)
		}
		<-b.entered
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := p.Stats().Processors.LongestCall; got < time.Hour-time.Second {
			t.Fatalf("an hour into the stall: LongestCall %v", got)
		}
		stopWithoutStallLines(t, p, b, &lines)
	})
}

// Guarantee: when Stop gives up on a handler that ignores its context, it
// returns within ShutdownTimeout + CancelGrace as before, and the stall
// watch has returned by then: only the handler is left running.
func TestStopGivingUpOnAStalledHandlerLeavesNoStallWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBlocker()
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "stuck",
			Logger:          slog.New(slog.DiscardHandler),
			ShutdownTimeout: 5 * time.Second,
			Processors: processor.Options[uint64, uint64]{Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				b.wait()
				return m.Data, nil
			}},
		})
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer func() { // a failed check's way out
			b.free()
			<-p.Done()
		}()
		if err := p.Push(t.Context(), message.New(uint64(1), acker.NewRecorder(false), 1)); err != nil {
			t.Fatal(err)
		}
		<-b.entered
		time.Sleep(time.Minute)
		began := time.Now()
		err := p.Stop(context.Background())
		if _, ok := errors.AsType[*pipeline.ShutdownTimeoutError](err); !ok {
			t.Fatalf("Stop: %v, want a *ShutdownTimeoutError", err)
		}
		if took := time.Since(began); took != 5*time.Second+pipeline.CancelGrace {
			t.Fatalf("Stop took %v, want ShutdownTimeout + CancelGrace", took)
		}
		// The watch's goroutine said it returned (Stop waited for that)
		// and may still be unwinding, in parallel with this one: the
		// stacks are read once every goroutine is blocked, so that only a
		// watch that kept running, ticking, shows in them.
		synctest.Wait()
		buf := make([]byte, 1<<20)
		if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "watchStalls") {
			t.Fatalf("the stall watch still runs once Stop returned:\n%s", stacks)
		}
	})
}

// Guarantee: the line that ends a stall reports the stall as a whole: took
// is how long its longest call ran, even once that call has returned and a
// shorter one is what keeps the stage stalled, and workers is the most
// calls past the threshold at once; a later stall of the stage is logged
// afresh (one WARN line, one INFO line) and reports only its own calls.
func TestStallEndedLineReportsTheWholeStallAndTheNextStallAfresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		blockers := []*blocker{newBlocker(), newBlocker(), newBlocker()}
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:   "stalls",
			Logger: slog.New(slog.NewTextHandler(&lines, nil)),
			Processors: processor.Options[uint64, uint64]{Concurrency: 2, MaxDemand: 1, Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				blockers[m.Data].wait()
				return m.Data, nil
			}},
		})
		startPipeline(t, p)
		for _, b := range blockers {
			t.Cleanup(b.free) // before Stop
		}
		push := func(i uint64) {
			t.Helper()
			if err := p.Push(t.Context(), message.New(i, acker.Discard, i)); err != nil {
				t.Fatal(err)
			}
			<-blockers[i].entered
		}
		sleep := func(d time.Duration) {
			time.Sleep(d)
			synctest.Wait()
		}
		// Call 0 runs 55 s, call 1 from 20 s to 60 s: both are past the
		// 30 s threshold from 51 s to 55 s, call 1 alone after that.
		push(0)
		sleep(20 * time.Second)
		push(1)
		sleep(35 * time.Second)
		blockers[0].free()
		sleep(5 * time.Second)
		if got := lines.Matching(pipeline.StallEndedLog); len(got) != 0 {
			t.Fatalf("while call 1 still runs past the threshold: %q, want no end line", got)
		}
		blockers[1].free()
		sleep(time.Second)
		ended := lines.Matching(pipeline.StallEndedLog)
		if len(ended) != 1 || !strings.Contains(ended[0], "took=54s") || !strings.Contains(ended[0], "workers=2") {
			t.Fatalf("once both calls returned: %q, want one end line with took=54s (call 0) and workers=2", ended)
		}
		// A second stall, of one call running 40 s.
		push(2)
		sleep(40 * time.Second)
		blockers[2].free()
		sleep(time.Second)
		if got := lines.Matching(pipeline.StallLog); len(got) != 2 {
			t.Fatalf("after two stalls: %q, want two WARN lines", got)
		}
		ended = lines.Matching(pipeline.StallEndedLog)
		if len(ended) != 2 || !strings.Contains(ended[1], "took=39s") || !strings.Contains(ended[1], "workers=1") {
			t.Fatalf("after the second stall: %q, want a second end line with took=39s and workers=1", ended)
		}
	})
}

// Guarantee: a stall that is still logged when the stages return (the
// stalled call returned during a drain, and the pipeline stopped before
// the watch's next reading) gets its end line all the same, before Stop
// returns: no WARN line is left without its INFO line.
func TestAStallOngoingWhenThePipelineStopsGetsItsEndLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		b := newBlocker()
		p := startStalling(t, pipeline.Options[uint64, uint64]{Name: "stall-at-stop"}, b, &lines)
		if err := p.Push(t.Context(), message.New(uint64(1), acker.Discard, 1)); err != nil {
			t.Fatal(err)
		}
		<-b.entered
		time.Sleep(40 * time.Second)
		synctest.Wait()
		if got := lines.Matching(pipeline.StallLog); len(got) != 1 {
			t.Fatalf("40 s into the stall: %q, want one WARN line", got)
		}
		b.free()
		if err := p.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := lines.Matching(pipeline.StallEndedLog); len(got) != 1 || !strings.Contains(got[0], "stage=stall-at-stop.processor ") {
			t.Fatalf("once Stop returned: %q, want one end line of the processors", got)
		}
	})
}

// Guarantee: a stall is a call that has run longer than StallThreshold:
// one that has run exactly as long is not logged.
func TestACallRunningExactlyTheStallThresholdIsNoStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		b := newBlocker()
		p := startStalling(t, pipeline.Options[uint64, uint64]{Name: "at-threshold", StallThreshold: 30 * time.Second}, b, &lines)
		if err := p.Push(t.Context(), message.New(uint64(1), acker.Discard, 1)); err != nil {
			t.Fatal(err)
		}
		<-b.entered
		synctest.Wait()
		// The first reading, 1 s in, dates the call; the one 31 s in sees
		// it 30 s old.
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if got := p.Stats().Processors.LongestCall; got != 30*time.Second {
			t.Fatalf("LongestCall = %v, want 30s", got)
		}
		time.Sleep(500 * time.Millisecond)
		stopWithoutStallLines(t, p, b, &lines)
	})
}

// handOffCases are the two ways a producer stage hands messages to the
// processors: a delivery straight to them, on the source's goroutine, and
// the stage's dispatcher, which a rate limit makes hand every delivery
// over.
var handOffCases = []struct {
	name  string
	limit *producer.RateLimit
}{
	{name: "direct delivery"},
	{name: "dispatcher", limit: &producer.RateLimit{Allowed: 1 << 20, Interval: time.Second}},
}

// oneMessageSource delivers one message, acknowledged by ack, once start
// is closed, and waits for the end of its run.
func oneMessageSource(ack acker.Acknowledger, start <-chan struct{}) producer.SourceFunc[uint64] {
	return func(ctx context.Context, st *producer.Stage[uint64]) error {
		feed := st.NewFeed("keys", nil)
		if _, err := feed.Acquire(ctx, 1); err != nil {
			return nil
		}
		select {
		case <-start:
		case <-ctx.Done():
			return nil
		}
		feed.Deliver(message.New(uint64(1), ack, 1))
		<-ctx.Done()
		return nil
	}
}

// Guarantee: a producer stage's hand-over of delivered messages to the
// processors, which runs their PartitionBy on the source's goroutine (a
// delivery straight to the processors) or on the stage's dispatching
// one, is watched as a processor's call is: while a PartitionBy blocks,
// Stats shows how long the hand-over has run
// (Producers[].LongestHandOff, 0 once it returned), the stage logs one
// WARN line, naming the stage and the processors' PartitionBy, once it
// has run longer than StallThreshold, and one INFO line once it
// returned; the processors, idle meanwhile, log none.
func TestAStalledPartitionByHandOverIsReportedWhileItRuns(t *testing.T) {
	for _, tc := range handOffCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { checkHandOffStall(t, tc.limit) })
		})
	}
}

// startHeld starts p, closes deliver once every goroutine of p waits
// (so that none waits for the stage's mutex, which a delivery that goes
// straight to the processors holds while their PartitionBy runs, and
// which synctest.Wait would not wait out), and waits until b holds a call
// of p. Once the test has returned, b is freed and p stopped.
func startHeld(t *testing.T, p *pipeline.Pipeline[uint64, uint64], b *blocker, deliver chan struct{}) {
	t.Helper()
	t.Cleanup(func() { _ = p.Stop(context.Background()) }) // a failed check's way out
	t.Cleanup(b.free)                                      // before Stop
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	close(deliver)
	<-b.entered
	synctest.Wait()
}

// checkHandOffStall runs a pipeline whose source delivers one message,
// under limit, whose PartitionBy blocks for 70 s, and checks Stats and the
// stall lines meanwhile.
func checkHandOffStall(t *testing.T, limit *producer.RateLimit) {
	var lines logtest.Lines
	b := newBlocker()
	rec := acker.NewRecorder(false)
	deliver := make(chan struct{})
	src := oneMessageSource(rec, deliver)
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:     "handoff",
		Logger:   slog.New(slog.NewTextHandler(&lines, nil)),
		Producer: producer.Options[uint64]{Source: src, RateLimit: limit},
		Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: identity,
			PartitionBy: func(m *message.Message[uint64]) string {
				b.wait()
				return "key"
			}},
	})
	startHeld(t, p, b, deliver)
	handOff := func() time.Duration {
		st := p.Stats()
		if len(st.Producers) != 1 {
			t.Fatalf("Stats: %d producer stages, want 1", len(st.Producers))
		}
		return st.Producers[0].LongestHandOff
	}
	for _, at := range []time.Duration{10 * time.Second, 20 * time.Second} {
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := handOff(); got != at {
			t.Fatalf("%v into the stall: LongestHandOff %v, want %v", at, got, at)
		}
	}
	if got := lines.Matching(pipeline.StallLog); len(got) != 0 {
		t.Fatalf("20 s into a stall under a 30 s threshold: %q, want no line", got)
	}
	time.Sleep(50 * time.Second)
	synctest.Wait()
	if got := handOff(); got != 70*time.Second {
		t.Fatalf("70 s into the stall: LongestHandOff %v, want 1m10s", got)
	}
	warned := lines.Matching(pipeline.StallLog)
	if len(warned) != 1 || !strings.Contains(warned[0], "level=WARN") || !strings.Contains(warned[0], "stage=handoff.producer.0 ") ||
		!strings.Contains(warned[0], `in="processors' PartitionBy"`) || !strings.Contains(warned[0], "threshold=30s") {
		t.Fatalf("70 s into the stall: %q, want one WARN line of stage handoff.producer.0 in the processors' PartitionBy", warned)
	}
	if got := lines.Matching(pipeline.StallEndedLog); len(got) != 0 {
		t.Fatalf("during the stall: %q", got)
	}
	b.free()
	if err := rec.Wait(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	synctest.Wait()
	ended := lines.Matching(pipeline.StallEndedLog)
	if len(ended) != 1 || !strings.Contains(ended[0], "level=INFO") || !strings.Contains(ended[0], "stage=handoff.producer.0 ") {
		t.Fatalf("once the hand-over returned: %q, want one INFO line of stage handoff.producer.0", ended)
	}
	if got := handOff(); got != 0 {
		t.Fatalf("once the hand-over returned: LongestHandOff %v, want 0", got)
	}
	if err := p.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := append(lines.Matching(pipeline.StallLog), lines.Matching(pipeline.StallEndedLog)...); len(got) != 2 {
		t.Fatalf("after the stall: %q, want its two lines alone (none of the processors)", got)
	}
}

// Guarantee: a producer stage's hand-over is timed while it runs the
// processors' PartitionBy, not while it waits for room in their queues:
// when stalled processors fill their queues, the processors report the
// stall and the stage, held back, shows no hand-over (LongestHandOff 0)
// and logs no stall line of its own.
func TestAHandOverWaitingForRoomIsNotReportedAsStalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		b := newBlocker()
		rec := acker.NewRecorder(false)
		const messages = 200 // more than the dispatcher takes at once
		src := producer.SourceFunc[uint64](func(ctx context.Context, st *producer.Stage[uint64]) error {
			feed := st.NewFeed("keys", nil)
			for got := 0; got < messages; {
				n, err := feed.Acquire(ctx, messages-got)
				if err != nil {
					return nil
				}
				for i := range n {
					feed.Deliver(message.New(uint64(got+i), rec, uint64(got+i)))
				}
				got += n
			}
			<-ctx.Done()
			return nil
		})
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:     "full",
			Logger:   slog.New(slog.NewTextHandler(&lines, nil)),
			Producer: producer.Options[uint64]{Source: src, Flow: producer.Flow{Initial: messages}},
			Processors: processor.Options[uint64, uint64]{Concurrency: 2, MaxDemand: 1, QueueCapacity: 1,
				Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
					b.wait()
					return m.Data, nil
				},
				PartitionBy: func(m *message.Message[uint64]) string { return strconv.FormatUint(m.Data, 10) }},
		})
		startHeld(t, p, b, make(chan struct{}))
		time.Sleep(70 * time.Second)
		synctest.Wait()
		st := p.Stats()
		if st.Producers[0].Buffered == 0 {
			t.Fatalf("70 s into the processors' stall: nothing buffered in the stage, want messages held back")
		}
		if got := st.Producers[0].LongestHandOff; got != 0 {
			t.Fatalf("70 s into the processors' stall: LongestHandOff %v, want 0 (the stage waits for room)", got)
		}
		warned := lines.Matching(pipeline.StallLog)
		if len(warned) != 1 || !strings.Contains(warned[0], "stage=full.processor ") {
			t.Fatalf("70 s into the processors' stall: %q, want the processors' WARN line alone", warned)
		}
		b.free()
		if err := rec.Wait(t.Context(), messages); err != nil {
			t.Fatal(err)
		}
		if err := p.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// Guarantee: a hand-over whose PartitionBy ends its goroutine
// (runtime.Goexit) has ended: wherever it ran, Stats shows no hand-over
// afterwards (LongestHandOff 0) and the stage logs no stall.
func TestAHandOverEndedByGoexitIsNotReportedAsStalled(t *testing.T) {
	for _, tc := range handOffCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var lines logtest.Lines
				rec := acker.NewRecorder(false)
				var once sync.Once
				deliver := make(chan struct{})
				close(deliver)
				src := oneMessageSource(rec, deliver)
				p := mustNew(t, pipeline.Options[uint64, uint64]{
					Name:     "exited",
					Logger:   slog.New(slog.NewTextHandler(&lines, nil)),
					Producer: producer.Options[uint64]{Source: src, RateLimit: tc.limit, Restart: producer.Restart{Backoff: time.Hour}},
					Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: identity,
						PartitionBy: func(m *message.Message[uint64]) string {
							once.Do(runtime.Goexit)
							return "key"
						}},
				})
				defer func() { _ = p.Stop(context.Background()) }() // a failed check's way out
				if err := p.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
				if err := rec.Wait(t.Context(), 1); err != nil {
					t.Fatal(err)
				}
				time.Sleep(70 * time.Second)
				synctest.Wait()
				if got := p.Stats().Producers[0].LongestHandOff; got != 0 {
					t.Fatalf("70 s after PartitionBy ended the hand-over: LongestHandOff %v, want 0", got)
				}
				if got := append(lines.Matching(pipeline.StallLog), lines.Matching(pipeline.StallEndedLog)...); len(got) != 0 {
					t.Fatalf("70 s after PartitionBy ended the hand-over: %q, want no stall line", got)
				}
				if err := p.Stop(t.Context()); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
