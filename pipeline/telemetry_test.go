package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/telemetry"
)

// hookCounts counts telemetry events.
type hookCounts struct {
	pipeStart, pipeStop, chunkStart, chunkStop, msgStart, msgStop, msgExc, failed, emit, batchStart, batchStop, batched, msgErr atomic.Int64
	mu                                                                                                                          sync.Mutex
	stages                                                                                                                      []string
}

func (c *hookCounts) hooks() *telemetry.Hooks {
	return &telemetry.Hooks{
		PipelineStart: func(_ context.Context, e telemetry.Pipeline) {
			c.pipeStart.Add(1)
			c.mu.Lock()
			c.stages = slices.Clone(e.Stages)
			c.mu.Unlock()
		},
		PipelineStop: func(context.Context, telemetry.Pipeline) { c.pipeStop.Add(1) },
		ChunkStart:   func(context.Context, telemetry.Chunk) { c.chunkStart.Add(1) },
		ChunkStop:    func(context.Context, telemetry.Chunk) { c.chunkStop.Add(1) },
		MessageStart: func(context.Context, telemetry.Message) { c.msgStart.Add(1) },
		MessageStop: func(_ context.Context, e telemetry.Message) {
			c.msgStop.Add(1)
			if e.Err != nil {
				c.msgErr.Add(1)
			}
		},
		MessageException: func(context.Context, telemetry.Message) { c.msgExc.Add(1) },
		HandleFailed:     func(_ context.Context, e telemetry.Failed) { c.failed.Add(int64(e.Count)) },
		BatchEmit:        func(context.Context, telemetry.Batch) { c.emit.Add(1) },
		BatchStart:       func(context.Context, telemetry.Batch) { c.batchStart.Add(1) },
		BatchStop: func(_ context.Context, e telemetry.Batch) {
			c.batchStop.Add(1)
			c.batched.Add(int64(e.Info.Size - e.Failed))
		},
	}
}

// hookedOptions is a pipeline with hooks and log whose handler panics on
// message 1 and fails message 2, with HandleFailed and a batcher of 4, so
// that every hook has its event.
func hookedOptions(hooks *telemetry.Hooks, log *slog.Logger) pipeline.Options[uint64, uint64] {
	return pipeline.Options[uint64, uint64]{
		Name:      "hooked",
		Logger:    log,
		Telemetry: hooks,
		Processors: processor.Options[uint64, uint64]{
			Concurrency: 2,
			Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				switch m.Data {
				case 1:
					panic("one")
				case 2:
					return 0, errors.New("two")
				}
				return m.Data, nil
			},
			HandleFailed: func(context.Context, []*message.Message[uint64]) {},
		},
		Batchers: []batcher.Options[uint64]{{Name: "default", BatchSize: 4, BatchTimeout: time.Millisecond, Handle: batchOK}},
	}
}

// Guarantee: every telemetry hook is called for its event: pipeline start
// (with the stage names) and stop, each chunk, each message (a panic as an
// exception, a failure with its error), HandleFailed, each batch emitted
// and handled.
func TestTelemetryHooksSeeEveryEvent(t *testing.T) {
	var c hookCounts
	p := mustNew(t, hookedOptions(c.hooks(), nil))
	runThrough(t, p, 20)
	want := map[string][2]int64{
		"pipeline start":      {c.pipeStart.Load(), 1},
		"pipeline stop":       {c.pipeStop.Load(), 1},
		"message start":       {c.msgStart.Load(), 20},
		"message stop":        {c.msgStop.Load(), 19},
		"message stop errors": {c.msgErr.Load(), 1},
		"message exception":   {c.msgExc.Load(), 1},
		"handle failed":       {c.failed.Load(), 2},
		"messages in batches": {c.batched.Load(), 18},
		"chunk stop = start":  {c.chunkStop.Load(), c.chunkStart.Load()},
		"batch start = emit":  {c.batchStart.Load(), c.emit.Load()},
		"batch stop = start":  {c.batchStop.Load(), c.batchStart.Load()},
	}
	for what, got := range want {
		if got[0] != got[1] {
			t.Errorf("%s: %d, want %d", what, got[0], got[1])
		}
	}
	if c.chunkStart.Load() == 0 || c.emit.Load() < 5 {
		t.Errorf("%d chunks, %d batches emitted; want some chunks and at least 5 batches of ≤ 4", c.chunkStart.Load(), c.emit.Load())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Equal(c.stages, []string{"hooked.processor", "hooked.batcher.default"}) {
		t.Errorf("stages %q", c.stages)
	}
}

// durations records the Duration of each timed event.
type durations struct {
	mu                        sync.Mutex
	msg, chunk, batch, failed []time.Duration
}

func (d *durations) add(to *[]time.Duration, v time.Duration) {
	d.mu.Lock()
	*to = append(*to, v)
	d.mu.Unlock()
}

func (d *durations) hooks(noDurations bool, sampling int) *telemetry.Hooks {
	return &telemetry.Hooks{
		NoDurations:      noDurations,
		DurationSampling: sampling,
		ChunkStop:        func(_ context.Context, e telemetry.Chunk) { d.add(&d.chunk, e.Duration) },
		MessageStop:      func(_ context.Context, e telemetry.Message) { d.add(&d.msg, e.Duration) },
		HandleFailed:     func(_ context.Context, e telemetry.Failed) { d.add(&d.failed, e.Duration) },
		BatchStop:        func(_ context.Context, e telemetry.Batch) { d.add(&d.batch, e.Duration) },
	}
}

// runTimed runs 6 messages through a pipeline whose handler, HandleFailed
// and batch handler each take at least work; every third message fails.
func runTimed(t *testing.T, hooks *telemetry.Hooks, work time.Duration) {
	t.Helper()
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:      "timed",
		Telemetry: hooks,
		Processors: processor.Options[uint64, uint64]{
			Concurrency: 1,
			Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				time.Sleep(work)
				if m.Data%3 == 0 {
					return 0, errors.New("third")
				}
				return m.Data, nil
			},
			HandleFailed: func(context.Context, []*message.Message[uint64]) { time.Sleep(work) },
		},
		Batchers: []batcher.Options[uint64]{{Name: "default", BatchSize: 2, BatchTimeout: time.Millisecond,
			Handle: func(context.Context, []*message.Message[uint64], message.BatchInfo) error {
				time.Sleep(work)
				return nil
			}}},
	})
	runThrough(t, p, 6)
}

// Guarantee: with every chunk timed (DurationSampling 1), a message's, a
// chunk's, a batch's and a HandleFailed call's Duration cover the time
// their handler took, even though the processor reads the clock once per
// message.
func TestTelemetryDurationsCoverTheHandlers(t *testing.T) {
	const work = 2 * time.Millisecond
	var d durations
	runTimed(t, d.hooks(false, 1), work)
	d.mu.Lock()
	defer d.mu.Unlock()
	for what, ds := range map[string][]time.Duration{"message": d.msg, "chunk": d.chunk, "batch": d.batch, "handle failed": d.failed} {
		if len(ds) == 0 {
			t.Errorf("no %s event", what)
		}
		for _, v := range ds {
			if v < work {
				t.Errorf("%s duration %v, want ≥ %v: %v", what, v, work, ds)
				break
			}
		}
	}
	if len(d.msg) != 6 {
		t.Errorf("%d message events, want 6", len(d.msg))
	}
}

// Guarantee: with NoDurations the pipeline reads no clock for the hooks:
// every event still comes, with a zero Duration.
func TestTelemetryNoDurationsLeavesDurationsZero(t *testing.T) {
	var d durations
	runTimed(t, d.hooks(true, 1), time.Millisecond)
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.msg) != 6 || len(d.chunk) == 0 || len(d.batch) == 0 || len(d.failed) == 0 {
		t.Fatalf("events: %d messages, %d chunks, %d batches, %d HandleFailed", len(d.msg), len(d.chunk), len(d.batch), len(d.failed))
	}
	for what, ds := range map[string][]time.Duration{"message": d.msg, "chunk": d.chunk, "batch": d.batch, "handle failed": d.failed} {
		for _, v := range ds {
			if v != 0 {
				t.Errorf("%s duration %v with NoDurations, want 0", what, v)
				break
			}
		}
	}
}

// Guarantee: a processor times one chunk in DurationSampling (64 when 0),
// its 1st, then every DurationSampling-th: that chunk's ChunkStop and
// MessageStop events have Timed set and a Duration covering the handler;
// every other chunk's events still come, untimed, with Duration 0.
func TestTelemetryDurationSamplingTimesOneChunkInN(t *testing.T) {
	const work = 200 * time.Microsecond
	for _, c := range []struct{ sampling, every, chunks int }{{3, 3, 10}, {0, 64, 130}} {
		t.Run(fmt.Sprintf("sampling=%d", c.sampling), func(t *testing.T) {
			type event struct {
				chunk bool
				timed bool
				d     time.Duration
			}
			var (
				mu     sync.Mutex
				events []event
			)
			note := func(e event) { mu.Lock(); events = append(events, e); mu.Unlock() }
			p := mustNew(t, pipeline.Options[uint64, uint64]{
				Name: "sampled",
				Telemetry: &telemetry.Hooks{
					DurationSampling: c.sampling,
					ChunkStop:        func(_ context.Context, e telemetry.Chunk) { note(event{true, e.Timed, e.Duration}) },
					MessageStop:      func(_ context.Context, e telemetry.Message) { note(event{false, e.Timed, e.Duration}) },
				},
				Processors: processor.Options[uint64, uint64]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
					time.Sleep(work)
					return m.Data, nil
				}},
			})
			if err := p.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			rec := acker.NewRecorder(false)
			for i := range c.chunks {
				// One message at a time, each its own chunk.
				if err := p.Push(ctxT(t, 10*time.Second), message.New(uint64(i), rec, uint64(i))); err != nil {
					t.Fatal(err)
				}
				if err := rec.Wait(ctxT(t, 10*time.Second), i+1); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Stop(ctxT(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(events) != 2*c.chunks {
				t.Fatalf("%d events, want a message and a chunk event for each of %d chunks", len(events), c.chunks)
			}
			for i := 0; i < len(events); i += 2 {
				chunk := i / 2
				msg, ch := events[i], events[i+1]
				want := chunk%c.every == 0
				if msg.chunk || !ch.chunk {
					t.Fatalf("events of chunk %d out of order: %+v", chunk, events[i:i+2])
				}
				for what, e := range map[string]event{"message": msg, "chunk": ch} {
					if e.timed != want || (want && e.d < work) || (!want && e.d != 0) {
						t.Errorf("chunk %d: %s event timed=%v duration %v; want timed=%v with a duration %s", chunk, what, e.timed, e.d, want,
							map[bool]string{true: "≥ the handler's", false: "of 0"}[want])
					}
				}
			}
		})
	}
}

// Guarantee: a negative DurationSampling is rejected by New, naming the
// field.
func TestTelemetryDurationSamplingValidated(t *testing.T) {
	_, err := pipeline.New(pipeline.Options[uint64, uint64]{
		Name:       "bad-sampling",
		Telemetry:  &telemetry.Hooks{DurationSampling: -1},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	if want := "invalid options: telemetry.durationSampling must be ≥ 0"; err == nil || err.Error() != want {
		t.Fatalf("New = %v, want %q", err, want)
	}
}

// Guarantee: every DurationSampling New accepts is one a processor can
// use: a value too large for the processor's chunk counter (past
// math.MaxUint32) is rejected by New, naming the field and the bound,
// rather than accepted and crashing the processor on its first chunk.
func TestTelemetryDurationSamplingUpperBound(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("no int above math.MaxUint32")
	}
	sampling := int(uint64(math.MaxUint32)) + 1
	p, err := pipeline.New(pipeline.Options[uint64, uint64]{
		Name:       "huge-sampling",
		Telemetry:  &telemetry.Hooks{DurationSampling: sampling, ChunkStop: func(context.Context, telemetry.Chunk) {}},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	if err == nil {
		runThrough(t, p, 1) // what a user gets: the processor's first chunk
		t.Fatalf("New accepted DurationSampling %d", sampling)
	}
	if want := "invalid options: telemetry.durationSampling must be ≤ 4294967295"; err.Error() != want {
		t.Fatalf("New = %v, want %q", err, want)
	}
}

// Guarantee: DurationSampling at its bound, math.MaxUint32, is accepted by
// New, and a processor runs with it, timing its first chunk.
func TestTelemetryDurationSamplingAcceptedAtItsBound(t *testing.T) {
	var timed atomic.Int64
	p, err := pipeline.New(pipeline.Options[uint64, uint64]{
		Name: "largest-sampling",
		Telemetry: &telemetry.Hooks{DurationSampling: math.MaxUint32, ChunkStop: func(_ context.Context, c telemetry.Chunk) {
			if c.Timed {
				timed.Add(1)
			}
		}},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	if err != nil {
		t.Fatalf("New with DurationSampling %d = %v", uint64(math.MaxUint32), err)
	}
	runThrough(t, p, 1)
	if n := timed.Load(); n != 1 {
		t.Fatalf("%d timed chunks, want the first one", n)
	}
}

// runThrough starts p, pushes messages 0 to n-1, waits for all their
// outcomes, stops p and returns the outcomes' recorder.
func runThrough(t *testing.T, p *pipeline.Pipeline[uint64, uint64], n int) *acker.Recorder {
	t.Helper()
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := acker.NewRecorder(false)
	var msgs []*message.Message[uint64]
	for i := range n {
		msgs = append(msgs, message.New(uint64(i), rec, uint64(i)))
	}
	if err := p.Push(ctxT(t, 10*time.Second), msgs...); err != nil {
		t.Fatal(err)
	}
	if err := rec.Wait(ctxT(t, 10*time.Second), n); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	return rec
}

// Guarantee: a telemetry hook that panics costs its own call and one error
// log line naming the hook and the stage: the pipeline starts and stops,
// and every message gets the outcome its handler gave it.
func TestPanickingTelemetryHooksLeaveOutcomesAlone(t *testing.T) {
	var c hookCounts
	hooks := c.hooks()
	hooks.PipelineStart = func(context.Context, telemetry.Pipeline) { panic("hook") }
	hooks.PipelineStop = func(context.Context, telemetry.Pipeline) { panic("hook") }
	hooks.ChunkStart = func(context.Context, telemetry.Chunk) { panic("hook") }
	hooks.ChunkStop = func(context.Context, telemetry.Chunk) { panic("hook") }
	hooks.MessageStart = func(context.Context, telemetry.Message) { panic("hook") }
	hooks.MessageStop = func(context.Context, telemetry.Message) { panic("hook") }
	hooks.MessageException = func(context.Context, telemetry.Message) { panic("hook") }
	hooks.HandleFailed = func(context.Context, telemetry.Failed) { panic("hook") }
	hooks.BatchEmit = func(context.Context, telemetry.Batch) { panic("hook") }
	hooks.BatchStart = func(context.Context, telemetry.Batch) { panic("hook") }
	hooks.BatchStop = func(context.Context, telemetry.Batch) { panic("hook") }
	var logged lockedBuffer
	p := mustNew(t, hookedOptions(hooks, slog.New(slog.NewJSONHandler(&logged, nil))))
	rec := runThrough(t, p, 20)
	if got := len(rec.Successful()); got != 18 {
		t.Errorf("%d messages succeeded, want 18", got)
	}
	if got := len(rec.Failed()); got != 2 {
		t.Errorf("%d messages failed, want 2 (the handler's)", got)
	}
	stages := map[string]string{
		"PipelineStart": "", "PipelineStop": "",
		"ChunkStart": "hooked.processor", "ChunkStop": "hooked.processor",
		"MessageStart": "hooked.processor", "MessageStop": "hooked.processor",
		"MessageException": "hooked.processor", "HandleFailed": "hooked.processor",
		"BatchEmit": "hooked.batcher.default", "BatchStart": "hooked.batcher.default",
		"BatchStop": "hooked.batcher.default",
	}
	seen := map[string]int{}
	for line := range strings.Lines(logged.String()) {
		var e struct{ Msg, Level, Hook, Stage, Pipeline, Panic string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if !strings.HasPrefix(e.Msg, "telemetry hook panicked") {
			continue
		}
		want, ok := stages[e.Hook]
		if !ok || e.Level != "ERROR" || e.Panic != "hook" || e.Stage != want || e.Pipeline != "hooked" {
			t.Errorf("log line %s: want an error naming a hook, its stage %q and the panic", line, want)
		}
		seen[e.Hook]++
	}
	for hook := range stages {
		if seen[hook] == 0 {
			t.Errorf("no log line for the panic of %s", hook)
		}
	}
	if n := seen["MessageStart"]; n != 20 {
		t.Errorf("%d log lines for MessageStart, want one per message, 20", n)
	}
}

// Guarantee: the PipelineStart hook may read the pipeline it is told about
// (Stats, Err, SourceStatus): Start does not hold the pipeline's lock
// while it calls the hook.
func TestPipelineStartHookMayReadThePipeline(t *testing.T) {
	var p *pipeline.Pipeline[uint64, uint64]
	read := make(chan pipeline.Stats, 1)
	hooks := &telemetry.Hooks{PipelineStart: func(context.Context, telemetry.Pipeline) {
		read <- p.Stats()
	}}
	p = mustNew(t, pipeline.Options[uint64, uint64]{
		Name:       "hooked",
		Telemetry:  hooks,
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	started := make(chan error, 1)
	go func() { started <- p.Start(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Start did not return: the PipelineStart hook's call to Stats waits for the lock Start holds")
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if st := <-read; st.Name != "hooked" {
		t.Errorf("the hook read Stats of %q, want the pipeline's", st.Name)
	}
}

// Guarantee: Stop called from the PipelineStart hook returns (nil, well
// before its context's deadline) rather than wait for the pipeline, which
// cannot stop while Start waits for the hook; the pipeline then stops as
// soon as the hook has returned: the messages pushed before Stop are
// handled and acknowledged once, Done is closed, Err is nil, and a later
// Stop returns nil.
func TestStopFromPipelineStartHookReturnsAndLeavesThePipelineStopped(t *testing.T) {
	var p *pipeline.Pipeline[uint64, uint64]
	rec := acker.NewRecorder(false)
	stopped := make(chan error, 1)
	hooks := &telemetry.Hooks{PipelineStart: func(ctx context.Context, _ telemetry.Pipeline) {
		msgs := make([]*message.Message[uint64], 5)
		for i := range msgs {
			msgs[i] = message.New(uint64(i), rec, uint64(i))
		}
		if err := p.Push(ctx, msgs...); err != nil {
			t.Errorf("Push from the hook = %v", err)
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		stopped <- p.Stop(sctx)
		if sctx.Err() != nil {
			t.Error("Stop from the PipelineStart hook returned only once its context ended")
		}
	}}
	p = mustNew(t, pipeline.Options[uint64, uint64]{
		Name:       "hooked",
		Telemetry:  hooks,
		Processors: processor.Options[uint64, uint64]{Handle: identity},
		Batchers:   []batcher.Options[uint64]{{Name: message.DefaultBatcher, BatchTimeout: time.Hour, Handle: batchOK}},
	})
	ctx := ctxT(t, 30*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Stop from the PipelineStart hook = %v, want nil", err)
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatal("the pipeline did not stop after the PipelineStart hook stopped it")
	}
	if err := p.Err(); err != nil {
		t.Errorf("Err = %v, want nil", err)
	}
	if !p.Stats().Stopped {
		t.Error("Stats().Stopped is false once Done is closed")
	}
	assertExactlyOnce(t, rec, 5)
	if err := p.Stop(ctx); err != nil {
		t.Errorf("Stop after the pipeline stopped = %v, want nil", err)
	}
}
