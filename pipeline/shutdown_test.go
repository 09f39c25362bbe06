package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
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
	"github.com/boulevard-go/boulevard/validate"
)

// stuckGate returns the channels of a stuckHandler and unblock, which
// closes release once however often it is called: defer it, so that
// nothing is left blocked if the test fails.
func stuckGate() (started, release chan struct{}, unblock func()) {
	started, release = make(chan struct{}), make(chan struct{})
	return started, release, sync.OnceFunc(func() { close(release) })
}

// stuckHandler returns a handler that, for message 1, signals started and
// then ignores its context until release is closed; it then returns its
// context's error, as a handler that noticed the cancellation late would.
// Every other message is handled at once.
func stuckHandler(started, release chan struct{}) processor.Handler[uint64, uint64] {
	return func(ctx context.Context, m *message.Message[uint64]) (uint64, error) {
		if m.Data == 1 {
			close(started)
			<-release
			return 0, fmt.Errorf("write: %w", ctx.Err())
		}
		return m.Data, nil
	}
}

// assertStraggler fails unless err is a *ShutdownTimeoutError wrapping
// ErrShutdownTimeout whose Running holds want, named in its message.
func assertStraggler(t *testing.T, err error, want pipeline.Straggler) {
	t.Helper()
	var ste *pipeline.ShutdownTimeoutError
	if !errors.Is(err, pipeline.ErrShutdownTimeout) || !errors.As(err, &ste) {
		t.Fatalf("error %v, want a *ShutdownTimeoutError", err)
	}
	if !slices.Contains(ste.Running, want) || !strings.Contains(err.Error(), want.String()) {
		t.Fatalf("error %q (running %v), want it to name %v", err, ste.Running, want)
	}
}

// stopNaming stops p with a deadline of 100ms and checks that Stop gives
// up on it naming want; it returns Stop's error.
func stopNaming(t *testing.T, p *pipeline.Pipeline[uint64, uint64], want pipeline.Straggler) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := p.Stop(ctx)
	assertStraggler(t, err, want)
	return err
}

// startWithOne starts p, pushes one message and waits until started is
// closed (a stage took the message and is stuck on it).
func startWithOne(t *testing.T, p *pipeline.Pipeline[uint64, uint64], started <-chan struct{}) {
	t.Helper()
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Push(context.Background(), message.New[uint64](1, nil, 1)); err != nil {
		t.Fatal(err)
	}
	<-started
}

// Guarantee: Stop returns by its context's deadline even though a handler
// ignores its context, with a *ShutdownTimeoutError naming the processor;
// the stuck message, once its handler returns its context's error, is
// reported as interrupted (retry), and the messages queued behind it are
// never acknowledged.
func TestStopReturnsByDeadlineWithStuckHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started, release, unblock := stuckGate()
		defer unblock() // so that nothing is left blocked if the test fails
		rec := acker.NewRecorder(false)
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "stuck",
			ShutdownTimeout: time.Minute,
			Processors:      processor.Options[uint64, uint64]{Concurrency: 1, MaxDemand: 1, Handle: stuckHandler(started, release)},
		})
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		msgs := []*message.Message[uint64]{message.New[uint64](1, rec, 1), message.New[uint64](2, rec, 2), message.New[uint64](3, rec, 3)}
		if err := p.Push(context.Background(), msgs...); err != nil {
			t.Fatal(err)
		}
		<-started
		const deadline = 500 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		begin := time.Now()
		err := p.Stop(ctx)
		if took := time.Since(begin); took > deadline {
			t.Fatalf("Stop took %v, past its %v deadline", took, deadline)
		}
		assertStraggler(t, err, pipeline.Straggler{Kind: pipeline.KindProcessor, Stage: "stuck.processor", Index: 0})
		if rec.Total() != 0 {
			t.Fatalf("%d outcomes before the stuck handler returned, want none", rec.Total())
		}
		unblock()
		<-p.Done()
		if rec.Total() != 1 || rec.FailedCount() != 1 {
			t.Fatalf("outcomes: %d successful, %d failed; want only the stuck message, failed", len(rec.Successful()), rec.FailedCount())
		}
		if o := rec.Failed()[0]; o.ID != 1 || !acker.Interrupted(o) || !errors.Is(o.Err, context.Canceled) || o.Disposition != acker.DispositionRetry {
			t.Fatalf("stuck message's outcome %+v, want interrupted (ErrShutdown, context.Canceled, retry)", o)
		}
	})
}

// Guarantee: with a context that never ends, Stop (and so Run) stops
// waiting for a handler that ignores its context CancelGrace after
// ShutdownTimeout, naming it.
func TestRunReturnsAfterShutdownTimeoutWithStuckHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started, release, unblock := stuckGate()
		defer unblock() // so that nothing is left blocked if the test fails
		const timeout = 2 * time.Second
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "run-stuck",
			ShutdownTimeout: timeout,
			Processors:      processor.Options[uint64, uint64]{Concurrency: 2, MaxDemand: 1, Handle: stuckHandler(started, release)},
		})
		ctx, cancel := context.WithCancel(context.Background())
		runErr := make(chan error, 1)
		go func() { runErr <- p.Run(ctx) }()
		synctest.Wait() // Run has started the pipeline
		if err := p.Push(context.Background(), message.New[uint64](1, nil, 1)); err != nil {
			t.Fatal(err)
		}
		<-started
		cancel()
		begin := time.Now()
		err := <-runErr
		if took := time.Since(begin); took != timeout+pipeline.CancelGrace {
			t.Fatalf("Run returned %v after its context was cancelled, want ShutdownTimeout + CancelGrace = %v", took, timeout+pipeline.CancelGrace)
		}
		var ste *pipeline.ShutdownTimeoutError
		if !errors.Is(err, pipeline.ErrShutdownTimeout) || !errors.As(err, &ste) || len(ste.Running) != 1 {
			t.Fatalf("Run = %v, want a *ShutdownTimeoutError naming only the stuck processor (the idle one returned)", err)
		}
		// Either processor may have taken the message.
		if st := ste.Running[0]; st.Kind != pipeline.KindProcessor || st.Stage != "run-stuck.processor" || !strings.Contains(err.Error(), st.String()) {
			t.Fatalf("Run = %v, want the stuck processor named", err)
		}
		unblock()
		<-p.Done()
	})
}

// closeIgnoringSource delivers nothing; its Close ignores its context until
// release is closed.
type closeIgnoringSource struct {
	producer.Basic
	release chan struct{}
}

func (s *closeIgnoringSource) Run(ctx context.Context, _ *producer.Stage[uint64]) error {
	<-ctx.Done()
	return nil
}

func (s *closeIgnoringSource) Close(context.Context) error {
	<-s.release
	return nil
}

// Guarantee: Stop returns by its context's deadline even though the
// source's Close ignores its context, naming the source's Close; with a
// context that never ends it stops waiting CancelGrace after Close's
// ShutdownTimeout.
func TestStopReturnsByDeadlineWithStuckClose(t *testing.T) {
	for _, withDeadline := range []bool{true, false} {
		t.Run(fmt.Sprintf("deadline=%v", withDeadline), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := &closeIgnoringSource{release: make(chan struct{})}
				unblock := sync.OnceFunc(func() { close(src.release) })
				defer unblock()
				const timeout = 3 * time.Second
				p := mustNew(t, pipeline.Options[uint64, uint64]{
					Name:            "closing",
					ShutdownTimeout: timeout,
					Producer:        producer.Options[uint64]{Source: src},
					Processors:      processor.Options[uint64, uint64]{Handle: identity},
				})
				if err := p.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				ctx, want := context.Background(), timeout+pipeline.CancelGrace
				if withDeadline {
					c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
					defer cancel()
					ctx, want = c, 200*time.Millisecond
				}
				begin := time.Now()
				err := p.Stop(ctx)
				if took := time.Since(begin); took > want {
					t.Fatalf("Stop took %v, want at most %v", took, want)
				}
				assertStraggler(t, err, pipeline.Straggler{Kind: pipeline.KindSourceClose, Stage: "closing.producer", Index: -1})
				if !strings.Contains(err.Error(), "the drain completed but the source's Close did not return") || p.Err() != nil {
					t.Fatalf("Stop = %q, Err = %v; want it to say only Close is late, with nothing left unacknowledged", err, p.Err())
				}
				unblock()
				<-p.Done()
			})
		})
	}
}

// Guarantee: once Stop has returned a *ShutdownTimeoutError, Stats
// reports the pipeline stopped, although what Stop gave up on still runs
// (Done is not closed yet), whether that is a handler that ignores its
// context (Stop's deadline passed, or ShutdownTimeout and CancelGrace did)
// or the source's Close; it still does once they have returned.
func TestStatsReportStoppedOnceStopGaveUp(t *testing.T) {
	for _, c := range []struct {
		name       string
		deadline   time.Duration // of Stop's context; 0: none
		stuckClose bool
	}{
		{"handler, Stop's deadline", 500 * time.Millisecond, false},
		{"handler, ShutdownTimeout", 0, false},
		{"source Close, Stop's deadline", 200 * time.Millisecond, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				started, release, unblock := stuckGate()
				defer unblock() // so that nothing is left blocked if the test fails
				opts := pipeline.Options[uint64, uint64]{
					Name:            "given-up",
					ShutdownTimeout: time.Second,
					Processors:      processor.Options[uint64, uint64]{Concurrency: 1, MaxDemand: 1, Handle: stuckHandler(started, release)},
				}
				if c.stuckClose {
					opts.Producer = producer.Options[uint64]{Source: &closeIgnoringSource{release: release}}
					opts.Processors.Handle = identity
				}
				p := mustNew(t, opts)
				if err := p.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				if !c.stuckClose {
					if err := p.Push(context.Background(), message.New[uint64](1, nil, 1)); err != nil {
						t.Fatal(err)
					}
					<-started
				}
				synctest.Wait()
				if st := p.Stats(); st.Stopped {
					t.Fatal("Stats reports a running pipeline stopped")
				}
				ctx := context.Background()
				if c.deadline > 0 {
					c, cancel := context.WithTimeout(ctx, c.deadline)
					defer cancel()
					ctx = c
				}
				var ste *pipeline.ShutdownTimeoutError
				if err := p.Stop(ctx); !errors.As(err, &ste) {
					t.Fatalf("Stop = %v, want a *ShutdownTimeoutError", err)
				}
				select {
				case <-p.Done():
					t.Fatal("Done is closed while what Stop gave up on still runs")
				default:
				}
				if !p.Stats().Stopped {
					t.Error("Stats does not report the pipeline stopped once Stop gave up on it")
				}
				unblock()
				<-p.Done()
				if !p.Stats().Stopped {
					t.Error("Stats does not report the pipeline stopped once Done is closed")
				}
			})
		})
	}
}

// startWithStuckSource starts, in a synctest bubble, a pipeline
// (ShutdownTimeout 1s, the given producer concurrency) whose source's Run
// ignores its context until unblock is called, and waits until it idles.
func startWithStuckSource(t *testing.T, name string, concurrency int) (p *pipeline.Pipeline[uint64, uint64], unblock func()) {
	t.Helper()
	release := make(chan struct{})
	unblock = sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)
	src := producer.SourceFunc[uint64](func(context.Context, *producer.Stage[uint64]) error {
		<-release // a blocking call that ignores its context
		return nil
	})
	p = mustNew(t, pipeline.Options[uint64, uint64]{
		Name:            name,
		ShutdownTimeout: time.Second,
		Producer:        producer.Options[uint64]{Source: src, Concurrency: concurrency},
		Processors:      processor.Options[uint64, uint64]{Handle: identity},
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	return p, unblock
}

// Guarantee: a source whose Run ignores its context is named as a producer
// stage when Stop gives up on it.
func TestStopNamesStuckProducerStage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, unblock := startWithStuckSource(t, "fetching", 2)
		stopNaming(t, p, pipeline.Straggler{Kind: pipeline.KindProducerStage, Stage: "fetching.producer.1", Index: -1})
		unblock()
		<-p.Done()
	})
}

// Guarantee: a batch handler that ignores its context is named as a batch
// processor when Stop gives up on it.
func TestStopNamesStuckBatchProcessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started, release, unblock := stuckGate()
		defer unblock() // so that nothing is left blocked if the test fails
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:       "batching",
			Processors: processor.Options[uint64, uint64]{Handle: identity},
			Batchers: []batcher.Options[uint64]{{Name: "default", BatchSize: 1, Concurrency: 1,
				Handle: func(context.Context, []*message.Message[uint64], message.BatchInfo) error {
					close(started)
					<-release
					return nil
				}}},
		})
		startWithOne(t, p, started)
		stopNaming(t, p, pipeline.Straggler{Kind: pipeline.KindBatchProcessor, Stage: "batching.batcher.default", Index: 0})
		unblock()
		<-p.Done()
	})
}

// Guarantee: a batcher's PartitionBy runs on the processor that hands the
// message to the batcher, and its Weight on the batcher partition: when
// either ignores the shutdown, Stop names that goroutine.
func TestStopNamesWhereABatchersKeyAndWeightRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(o *batcher.Options[uint64], stuck func())
		want pipeline.Straggler
	}{
		{"partitionBy", func(o *batcher.Options[uint64], stuck func()) {
			o.Concurrency = 2
			o.PartitionBy = func(*message.Message[uint64]) string { stuck(); return "" }
		}, pipeline.Straggler{Kind: pipeline.KindProcessor, Stage: "keys.processor", Index: 0}},
		{"weight", func(o *batcher.Options[uint64], stuck func()) {
			o.Weight = func(*message.Message[uint64]) int { stuck(); return 1 }
			o.MaxWeight = 10
		}, pipeline.Straggler{Kind: pipeline.KindBatcher, Stage: "keys.batcher.default", Index: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				started, release, unblock := stuckGate()
				defer unblock() // so that nothing is left blocked if the test fails
				bo := batcher.Options[uint64]{Name: "default", BatchSize: 10, Handle: batchOK}
				tc.set(&bo, func() {
					close(started)
					<-release // ignores the shutdown
				})
				p := mustNew(t, pipeline.Options[uint64, uint64]{
					Name:       "keys",
					Processors: processor.Options[uint64, uint64]{Concurrency: 1, Handle: identity},
					Batchers:   []batcher.Options[uint64]{bo},
				})
				startWithOne(t, p, started)
				err := stopNaming(t, p, tc.want)
				var ste *pipeline.ShutdownTimeoutError
				if errors.As(err, &ste) && len(ste.Running) != 1 {
					t.Errorf("still running %v, want only %v", ste.Running, tc.want)
				}
				unblock()
				<-p.Done()
			})
		})
	}
}

// Guarantee: when every handler honours its context, a Stop whose deadline
// comes before the drain ends cuts it short early enough that everything
// has returned when Stop does: it reports the plain ErrShutdownTimeout
// (nothing left running) and Done is closed.
func TestStopDeadlineWithPoliteHandlerLeavesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{})
		rec := acker.NewRecorder(false)
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "polite",
			ShutdownTimeout: time.Minute,
			Processors: processor.Options[uint64, uint64]{Concurrency: 1, MaxDemand: 1, Handle: func(ctx context.Context, m *message.Message[uint64]) (uint64, error) {
				if m.Data == 1 {
					close(started)
					<-ctx.Done()
					return 0, ctx.Err()
				}
				return m.Data, nil
			}},
		})
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := p.Push(context.Background(), message.New[uint64](1, rec, 1), message.New[uint64](2, rec, 2)); err != nil {
			t.Fatal(err)
		}
		<-started
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := p.Stop(ctx)
		var ste *pipeline.ShutdownTimeoutError
		if !errors.Is(err, pipeline.ErrShutdownTimeout) || errors.As(err, &ste) {
			t.Fatalf("Stop = %v, want the plain ErrShutdownTimeout", err)
		}
		select {
		case <-p.Done():
		default:
			t.Fatal("Done not closed when Stop returned")
		}
		if rec.Total() != 1 || !acker.Interrupted(rec.Failed()[0]) || rec.Failed()[0].Disposition != acker.DispositionRetry {
			t.Fatalf("outcomes %v / %v, want only message 1, interrupted", rec.Successful(), rec.Failed())
		}
	})
}

// Guarantee: Push refuses a nil message with ErrNilMessage and pushes none
// of the batch; a message without an acknowledger is handled and
// acknowledged to acker.Discard, without a crash.
func TestPushBadMessages(t *testing.T) {
	handled := make(chan uint64, 4)
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name: "bad-input",
		Processors: processor.Options[uint64, uint64]{Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
			handled <- m.Data
			return m.Data, nil
		}},
	})
	ctx := ctxT(t, 10*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	err := p.Push(ctx, message.New[uint64](1, nil, 1), nil)
	if !errors.Is(err, pipeline.ErrNilMessage) {
		t.Fatalf("Push with a nil message = %v, want ErrNilMessage", err)
	}
	if err := p.Push(ctx, message.New[uint64](2, nil, 2), &message.Message[uint64]{Data: 3}); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	close(handled)
	var got []uint64
	for d := range handled {
		got = append(got, d)
	}
	slices.Sort(got)
	if !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("handled %v, want [2 3]: nothing of the batch with a nil message", got)
	}
}

// Guarantee: Start and Run on a pipeline stopped before it ran say so
// (ErrStoppedBeforeStart, which is also ErrStopped and ErrAlreadyStarted).
func TestStartAfterStopBeforeStart(t *testing.T) {
	p := pushOnly(t)
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, start := range map[string]func(context.Context) error{"Start": p.Start, "Run": p.Run} {
		err := start(context.Background())
		if !errors.Is(err, pipeline.ErrStoppedBeforeStart) || !errors.Is(err, pipeline.ErrStopped) || !errors.Is(err, pipeline.ErrAlreadyStarted) {
			t.Fatalf("%s = %v, want ErrStoppedBeforeStart", name, err)
		}
		if !strings.Contains(err.Error(), "stopped before it ran") {
			t.Fatalf("%s = %q, want it to say the pipeline was stopped before it ran", name, err)
		}
	}
}

// Guarantee: Start and Run on a pipeline that ran refuse to run it again,
// with an error that says it stopped (it wraps ErrStopped and
// ErrAlreadyStarted): once Stop gave up on it while a handler still runs,
// and once it has stopped; nothing is started again.
func TestStartAfterStopSaysThePipelineStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started, release, unblock := stuckGate()
		defer unblock() // so that nothing is left blocked if the test fails
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:       "ran",
			Processors: processor.Options[uint64, uint64]{Concurrency: 1, MaxDemand: 1, Handle: stuckHandler(started, release)},
		})
		startWithOne(t, p, started)
		if err := p.Start(context.Background()); !errors.Is(err, pipeline.ErrAlreadyStarted) || errors.Is(err, pipeline.ErrStopped) {
			t.Fatalf("Start while running = %v, want ErrAlreadyStarted alone", err)
		}
		stopNaming(t, p, pipeline.Straggler{Kind: pipeline.KindProcessor, Stage: "ran.processor", Index: 0})
		check := func(when string) {
			t.Helper()
			for name, start := range map[string]func(context.Context) error{"Start": p.Start, "Run": p.Run} {
				err := start(context.Background())
				if !errors.Is(err, pipeline.ErrStopped) || !errors.Is(err, pipeline.ErrAlreadyStarted) || !strings.Contains(err.Error(), "stopped") {
					t.Fatalf("%s %s = %v, want an error saying the pipeline stopped (ErrStopped and ErrAlreadyStarted)", name, when, err)
				}
			}
		}
		check("once Stop gave up")
		unblock()
		<-p.Done()
		check("once stopped")
		if err := p.Push(context.Background(), message.New[uint64](2, nil, 2)); !errors.Is(err, pipeline.ErrStopped) {
			t.Fatalf("Push after the refused Start = %v, want ErrStopped", err)
		}
	})
}

// Guarantee: a pipeline with batchers but none named "default" is refused
// at New, naming the rule, unless ExplicitRouting says every message is
// routed.
func TestDefaultBatcherRequired(t *testing.T) {
	o := validOptions()
	o.Batchers[0].Name = "s3"
	_, err := pipeline.New(o)
	if !errors.Is(err, validate.ErrInvalid) || !strings.Contains(err.Error(), `batchers must include one named "default"`) {
		t.Fatalf("New = %v, want the default-batcher rule", err)
	}
	o.ExplicitRouting = true
	if _, err := pipeline.New(o); err != nil {
		t.Fatalf("New with ExplicitRouting = %v", err)
	}
}

// Guarantee: pipeline and batcher names with whitespace or control
// characters are refused at New, and the error carries none of them raw.
func TestNamesRefuseControlCharacters(t *testing.T) {
	for _, bad := range []string{"orders\nlevel=ERROR msg=FORGED", "red\x1b[31m", "two words"} {
		for _, field := range []string{"name", "batchers[0].name"} {
			o := validOptions()
			if field == "name" {
				o.Name = bad
			} else {
				o.Batchers[0].Name = bad
				o.ExplicitRouting = true
			}
			_, err := pipeline.New(o)
			if err == nil {
				t.Fatalf("%s %q accepted", field, bad)
			}
			if msg := err.Error(); !strings.Contains(msg, field+" must be") || strings.ContainsAny(msg, "\n\x1b") || strings.Contains(msg, "FORGED") {
				t.Fatalf("%s %q: error %q, want the rule without the raw name", field, bad, msg)
			}
		}
	}
}

// slowCloseSource is exhausted at once; its Close takes closeTakes and
// reports whether its context had ended by then.
type slowCloseSource struct {
	producer.Basic
	closeTakes time.Duration
	ctxErr     chan error
}

func (s *slowCloseSource) Run(context.Context, *producer.Stage[uint64]) error { return nil }

func (s *slowCloseSource) Close(ctx context.Context) error {
	time.Sleep(s.closeTakes)
	s.ctxErr <- ctx.Err()
	return nil
}

// Guarantee: the largest ShutdownTimeout (the usual "no limit") leaves the
// source's Close all the time it needs: its context stays live, and Run
// reports no shutdown timeout for a drain that was not late.
func TestLargestShutdownTimeoutLeavesCloseItsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &slowCloseSource{closeTakes: 10 * time.Millisecond, ctxErr: make(chan error, 1)}
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "no-limit",
			ShutdownTimeout: time.Duration(math.MaxInt64),
			Producer:        producer.Options[uint64]{Source: src},
			Processors:      processor.Options[uint64, uint64]{Handle: identity},
		})
		runErr := p.Run(context.Background())
		if cerr := <-src.ctxErr; cerr != nil {
			t.Errorf("the source's Close saw its context end (%v) after 10ms, with ShutdownTimeout %v", cerr, time.Duration(math.MaxInt64))
		}
		if runErr != nil {
			t.Errorf("Run = %v, want nil: the drain completed and Close returned after 10ms", runErr)
		}
	})
}

// ctxCloseSource delivers nothing; its Close returns its context's error
// when that context has ended.
type ctxCloseSource struct {
	producer.Basic
}

func (s *ctxCloseSource) Run(ctx context.Context, _ *producer.Stage[uint64]) error {
	<-ctx.Done()
	return nil
}

func (s *ctxCloseSource) Close(ctx context.Context) error { return ctx.Err() }

// Guarantee: after a drain the shutdown timeout cut short (a handler
// ignored its context), the source's Close, called with a context already
// ended, returning that context's error is one WARN line, not an ERROR:
// the stop reports the cut already; the error is still joined to Err.
func TestACloseCutShortWithTheDrainIsAWarning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started, release, unblock := stuckGate()
		defer unblock()
		recs := &logtest.Records{}
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "cut-close",
			Logger:          slog.New(recs),
			ShutdownTimeout: time.Second,
			Producer:        producer.Options[uint64]{Source: &ctxCloseSource{}},
			Processors:      processor.Options[uint64, uint64]{Concurrency: 1, MaxDemand: 1, Handle: stuckHandler(started, release)},
		})
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := p.Push(context.Background(), message.New[uint64](1, nil, 1)); err != nil {
			t.Fatal(err)
		}
		<-started
		if err := p.Stop(context.Background()); !errors.Is(err, pipeline.ErrShutdownTimeout) {
			t.Fatalf("Stop = %v, want the shutdown timeout", err)
		}
		unblock()
		<-p.Done()
		if n := recs.Count(slog.LevelError, "closing the source failed"); n != 0 {
			t.Fatalf("%d ERROR lines for a Close given a context already ended, want none", n)
		}
		if n := recs.Count(slog.LevelWarn, pipeline.CloseCutShortLog); n != 1 {
			t.Fatalf("%d WARN lines %q, want 1", n, pipeline.CloseCutShortLog)
		}
		if err := p.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v, want the Close's error joined", err)
		}
	})
}

// Guarantee: a *ShutdownTimeoutError names only the producer stages still
// running: one whose source failed too often and that gave up has returned,
// and is not named beside one whose source ignores its context.
func TestStopNamesOnlyTheProducerStagesStillRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		src := producer.SourceFunc[uint64](func(_ context.Context, st *producer.Stage[uint64]) error {
			if strings.HasSuffix(st.Name(), ".producer.0") {
				return errors.New("broker gone")
			}
			<-release // a blocking call that ignores its context
			return nil
		})
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "half-failed",
			ShutdownTimeout: time.Second,
			Producer: producer.Options[uint64]{Source: src, Concurrency: 2, Restart: producer.Restart{
				MaxRestarts: 1, Window: time.Minute, Backoff: time.Millisecond, MaxBackoff: time.Millisecond,
			}},
			Processors: processor.Options[uint64, uint64]{Handle: identity},
		})
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if st := p.SourceStatus(); st[0].State != producer.StateFailed {
			t.Fatalf("stage 0 is %v, want failed", st[0].State)
		}
		err := stopNaming(t, p, pipeline.Straggler{Kind: pipeline.KindProducerStage, Stage: "half-failed.producer.1", Index: -1})
		var ste *pipeline.ShutdownTimeoutError
		if errors.As(err, &ste) && len(ste.Running) != 1 {
			t.Fatalf("Stop named %v, want only the stage still running", ste.Running)
		}
		release <- struct{}{}
		<-p.Done()
	})
}
