package sourcetest

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// waitLimit bounds every wait of the suite (shortened by the suite's own
// tests of broken sources).
var waitLimit = 30 * time.Second

// flow is the permit window of every subtest: small, so that a source that
// does not honour it shows at once.
var flow = producer.Flow{Initial: 8, Threshold: 4, Refill: 4}

// handlers is the processors' concurrency.
const handlers = 2

// held is the rate limit that holds a pipeline: at most held messages pass
// (fewer when the dispatcher asks for more tokens than are left, and waits
// for them), then nothing for an hour, so that what the source delivers
// stays in the stage buffer, where Stage.Buffered counts it. It is below
// Initial-Threshold, so that no feed is refilled while the limit holds.
const held = 3

var holding = &producer.RateLimit{Allowed: held, Interval: time.Hour}

// ledger records what the handlers saw, before they return.
type ledger struct {
	mu    sync.Mutex
	seen  map[string]int
	calls int // handler calls
}

func newLedger() *ledger { return &ledger{seen: map[string]int{}} }

func (l *ledger) add(key string) {
	l.mu.Lock()
	l.seen[key]++
	l.calls++
	l.mu.Unlock()
}

// counts returns the handler calls and the distinct keys handled.
func (l *ledger) counts() (calls, distinct int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls, len(l.seen)
}

func (l *ledger) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.seen)
}

// covers reports whether every key was handled.
func (l *ledger) covers(keys []string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if l.seen[k] == 0 {
			return false
		}
	}
	return true
}

// unknown lists handled keys that were not published (at most five).
func (l *ledger) unknown(keys []string) []string {
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	var out []string
	for k := range l.snapshot() {
		if !want[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out[:min(len(out), 5)]
}

// logWatch is the pipelines' log handler: it keeps the warnings that mean
// a source broke its contract.
type logWatch struct {
	mu       sync.Mutex
	problems []string
}

// contractWarnings are the warnings the producer stage logs when a source
// breaks its contract: it delivered more than it was granted, or delivered
// messages that were dropped unacknowledged (to a closed feed, or after its
// Run returned).
var contractWarnings = []string{"does not honour the permit window", "dropped unacknowledged"}

func (w *logWatch) Enabled(context.Context, slog.Level) bool { return true }

func (w *logWatch) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	for _, c := range contractWarnings {
		if strings.Contains(r.Message, c) {
			var b strings.Builder
			b.WriteString(r.Message)
			r.Attrs(func(a slog.Attr) bool {
				fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
				return true
			})
			w.mu.Lock()
			w.problems = append(w.problems, b.String())
			w.mu.Unlock()
		}
	}
	return nil
}

func (w *logWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *logWatch) WithGroup(string) slog.Handler      { return w }

func (w *logWatch) check(t testing.TB) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.problems {
		t.Errorf("the pipeline reported a source that breaks its contract: %s", p)
	}
}

// env is one subtest's fixture, keys and observers.
type env[T any] struct {
	t     testing.TB
	fx    Fixture[T]
	feeds int
	keys  []string
	logs  *logWatch
	// shutdown is the ShutdownTimeout of the pipelines start builds:
	// waitLimit unless a subtest cuts its drain short.
	shutdown time.Duration
}

// setup starts a fixture for n messages (at least the configured count),
// builds its first source and publishes. A saturated setup has enough
// messages for every feed to fill its window.
func setup[T any](t testing.TB, h Harness[T], saturated bool) (*env[T], *observed[T]) {
	t.Helper()
	n := messages()
	if saturated {
		// Enough for every feed to fill its window, twice over.
		n = max(n, 2*max(h.Feeds, 1)*flow.MaxWindow())
	}
	fx := h.Start(t, n)
	if fx.NewSource == nil || fx.Publish == nil || fx.Key == nil || fx.Settled == nil {
		t.Fatal("sourcetest: the Fixture lacks one of NewSource, Publish, Key, Settled")
	}
	e := &env[T]{t: t, fx: fx, feeds: max(h.Feeds, 1), logs: &logWatch{}, shutdown: waitLimit}
	src := e.source()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	keys, err := fx.Publish(ctx)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	if len(keys) != n {
		t.Fatalf("published %d messages, want %d", len(keys), n)
	}
	e.keys = keys
	t.Cleanup(func() { e.logs.check(t) })
	return e, src
}

// source builds a new observed source on the fixture.
func (e *env[T]) source() *observed[T] {
	e.t.Helper()
	src, err := e.fx.NewSource()
	if err != nil {
		e.t.Fatalf("new source: %v", err)
	}
	return observe(src)
}

// start builds and starts a pipeline over src whose handler records every
// message in l, then calls do (which may fail it), and stops it at cleanup.
// rl is its rate limit (nil: none).
func (e *env[T]) start(name string, src *observed[T], l *ledger, rl *producer.RateLimit, do func(ctx context.Context, m *message.Message[T]) error) *pipeline.Pipeline[T, T] {
	e.t.Helper()
	p, err := pipeline.New(pipeline.Options[T, T]{
		Name:            name,
		Logger:          slog.New(e.logs),
		ShutdownTimeout: e.shutdown,
		Producer: producer.Options[T]{
			Source:    src,
			Flow:      flow,
			RateLimit: rl,
			Restart: producer.Restart{
				MaxRestarts: 10, Window: time.Minute,
				Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
			},
		},
		Processors: processor.Options[T, T]{
			Concurrency: handlers,
			MaxDemand:   1,
			Handle: func(ctx context.Context, m *message.Message[T]) (T, error) {
				var err error
				if do != nil {
					err = do(ctx, m)
				}
				l.add(e.fx.Key(m))
				return m.Data, err
			},
		},
	})
	if err != nil {
		e.t.Fatalf("pipeline.New: %v", err)
	}
	if err := p.Start(context.Background()); err != nil {
		e.t.Fatalf("start: %v", err)
	}
	e.t.Cleanup(func() {
		// A subtest that failed may leave the pipeline held: a drain would
		// wait for the rate limit until the shutdown timeout.
		_ = p.SetRateLimit(nil)
		_ = stop(p)
	})
	return p
}

// stop stops p within the wait limit.
func stop[T any](p *pipeline.Pipeline[T, T]) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	return p.Stop(ctx)
}

// settled reads the broker's settlement count.
func (e *env[T]) settled() int { return e.read("what the broker settled", e.fx.Settled) }

// fetched reads how many messages the broker has handed out.
func (e *env[T]) fetched() int { return e.read("what the broker handed out", e.fx.Fetched) }

// read calls one of the fixture's counters.
func (e *env[T]) read(what string, count func(context.Context) (int, error)) int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	n, err := count(ctx)
	if err != nil {
		e.t.Fatalf("reading %s: %v", what, err)
	}
	return n
}

// startHeld starts a pipeline over src held by its rate limit, and waits
// until it is full (see fill).
func (e *env[T]) startHeld(name string, src *observed[T]) (*pipeline.Pipeline[T, T], *ledger) {
	e.t.Helper()
	l := newLedger()
	p := e.start(name, src, l, holding, nil)
	e.fill(src, l)
	return p, l
}

// fill waits until every feed of the held pipeline has delivered its first
// window (or more, which the callers report): what was not dispatched under
// the rate limit (at most held messages) waits in the stage buffer.
func (e *env[T]) fill(src *observed[T], l *ledger) {
	e.t.Helper()
	want := e.feeds * flow.Initial
	wait.Within(e.t, waitLimit, fmt.Sprintf("%d messages (%d feeds × Initial %d) handled or in the stage buffer",
		want, e.feeds, flow.Initial), func() bool {
		calls, _ := l.counts()
		return calls+src.buffered() >= want
	}, func() string { return heldState(src, l) })
}

// heldState describes a held pipeline.
func heldState[T any](src *observed[T], l *ledger) string {
	calls, _ := l.counts()
	active, runs, _ := src.state()
	return fmt.Sprintf("%d handled, %d buffered, %d of %d runs active", calls, src.buffered(), active, runs)
}

// release lifts the rate limit that holds p.
func release[T any](t testing.TB, p *pipeline.Pipeline[T, T]) {
	t.Helper()
	if err := p.SetRateLimit(nil); err != nil {
		t.Fatalf("lift the rate limit: %v", err)
	}
}

// waitSettled waits until the broker has settled at least want messages,
// and returns its count.
func (e *env[T]) waitSettled(want int) int {
	e.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		got := e.settled()
		if got >= want {
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for the broker to settle %d messages; it settled %d", waitLimit, want, got)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
