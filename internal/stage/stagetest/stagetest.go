// Package stagetest runs a pipeline stage's Run on its own in tests, the way
// the pipeline does, and waits for it, counts what the stages report left
// unacknowledged (UnackedLog), and holds what the stages' tests of user
// code ending its goroutine share (GoexitOnce, ExpectAckedOnce,
// ExpectOnlyFirstExited).
package stagetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

// Runner is a stage: Run returns once every goroutine of the stage has.
type Runner interface{ Run(ctx context.Context) }

// runs maps a stage, by a weak pointer, to the channel closed when its Run
// returns: a stage no test holds any more is collected with all it
// references, and its entry goes with it, so a test running thousands of
// stages keeps none of them.
var runs sync.Map

// Go calls r.Run(ctx) in a new goroutine and returns a channel closed when
// it returns; Done(r) returns the same channel.
func Go[S any, R interface {
	*S
	Runner
}](ctx context.Context, r R) <-chan struct{} {
	done := make(chan struct{})
	key := weak.Make((*S)(r))
	runs.Store(key, done)
	runtime.AddCleanup((*S)(r), func(key weak.Pointer[S]) { runs.Delete(key) }, key)
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	return done
}

// Done is the channel Go returned for r.
func Done[S any, R interface {
	*S
	Runner
}](r R) <-chan struct{} {
	ch, _ := runs.Load(weak.Make((*S)(r)))
	return ch.(chan struct{})
}

// WaitStopped waits up to patience for done, failing the test instead of
// hanging when a goroutine of the stage does not return after the hard
// stop.
func WaitStopped(t testing.TB, done <-chan struct{}, patience time.Duration) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(patience):
		t.Error("timed out waiting for every goroutine of the stage to return after the hard stop")
	}
}

// UnackedLog is a slog.Handler that sums the "messages" attribute of the
// warnings that report messages left unacknowledged (those whose text says
// they "stay unacknowledged"), as the stages log them when the hard stop
// cuts a drain short. Other records are ignored.
type UnackedLog struct {
	mu    sync.Mutex
	sum   int
	lines []string
}

// Enabled reports whether lv is WARN or above.
func (l *UnackedLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }

// Handle adds the "messages" of a warning about unacknowledged messages.
func (l *UnackedLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level != slog.LevelWarn || !strings.Contains(r.Message, "stay unacknowledged") {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "messages" {
			l.mu.Lock()
			l.sum += int(a.Value.Int64())
			l.lines = append(l.lines, fmt.Sprintf("%q messages=%d", r.Message, a.Value.Int64()))
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

// WithAttrs returns l: the attributes do not matter to the sum.
func (l *UnackedLog) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l.
func (l *UnackedLog) WithGroup(string) slog.Handler { return l }

// Sum returns the sum of the "messages" of the warnings logged so far and
// the warnings themselves, one line each.
func (l *UnackedLog) Sum() (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sum, slices.Clone(l.lines)
}

// Input is the input of a stage: the processors' or a batcher's.
type Input[T any] interface {
	Publish(ctx context.Context, msgs []*message.Message[T]) (int, error)
	CloseInput()
}

// CutShort publishes msgs to in, in chunks of random sizes a few
// milliseconds apart (from seed), until in refuses them; then it closes
// in's input, as the pipeline does once the stages before it have
// returned. Meanwhile cancel is called after cut, the hard stop cutting
// the drain short. It waits for done, the stage having returned, and
// returns how many messages in took and how many of those got no outcome
// in rec, failing t for a message acknowledged more than once. Meant to
// run in a synctest bubble.
func CutShort[T any](t testing.TB, in Input[T], done <-chan struct{}, ctx context.Context, cancel context.CancelFunc,
	msgs []*message.Message[T], rec *acker.Recorder, seed uint64, cut time.Duration) (accepted, left int) {
	t.Helper()
	published := make(chan struct{})
	go func() {
		defer close(published)
		defer in.CloseInput()
		rng := rand.New(rand.NewPCG(seed, 1))
		for i := 0; i < len(msgs); {
			k := min(len(msgs)-i, 1+rng.IntN(40))
			n, err := in.Publish(ctx, msgs[i:i+k])
			accepted += n
			if err != nil {
				return
			}
			i += k
			time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
		}
	}()
	go func() {
		select {
		case <-time.After(cut):
			cancel()
		case <-ctx.Done():
		}
	}()
	<-published
	<-done
	counts := rec.Counts()
	for id, n := range counts {
		if n != 1 {
			t.Errorf("message %d acknowledged %d times", id, n)
		}
	}
	return accepted, accepted - len(counts)
}

// Work is a handler's work in the cut-short tests, on a message or batch
// whose first payload is data: data%4 milliseconds that ignore ctx
// (data%3 == 0) or end with it (1), or, for data%3 == 2, nothing, and a
// refusal when data is even.
func Work(ctx context.Context, data uint64) error {
	d := time.Duration(data%4) * time.Millisecond
	switch data % 3 {
	case 0: // ignores its context
		time.Sleep(d)
	case 1:
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	default:
		if data%2 == 0 {
			return errors.New("refused")
		}
	}
	return nil
}

// ReportEarly has a handler report the outcome of some messages itself,
// chosen by n: one in four (n%4 == 1) is acknowledged with its chunk
// (message.AckImmediately), and one in four (n%4 == 3) is deferred and
// acknowledged at once through its acknowledger. A stage that stops
// before handing them on owes them no outcome.
func ReportEarly[T any](ctx context.Context, m *message.Message[T], n uint64) {
	switch n % 4 {
	case 1:
		m.AckImmediately()
	case 3:
		m.Defer()
		ack, _, _ := m.Acknowledger()
		ack.Ack(ctx, []acker.Outcome{m.Outcome()}, nil)
	}
}

// GoexitOnce returns a function that ends the goroutine calling it
// (runtime.Goexit) the first time it is called, and returns at once every
// later time: the body of a user hook that exits once.
func GoexitOnce() func() {
	var exited atomic.Bool
	return func() {
		if exited.CompareAndSwap(false, true) {
			runtime.Goexit()
		}
	}
}

// ExpectAckedOnce fails t unless each of the messages with ids 0 to n-1
// got exactly one outcome in rec.
func ExpectAckedOnce(t testing.TB, rec *acker.Recorder, n int) {
	t.Helper()
	counts := rec.Counts()
	for id := range uint64(n) {
		if counts[id] != 1 {
			t.Errorf("message %d acknowledged %d times, want once", id, counts[id])
		}
	}
}

// ExpectOnlyFirstExited fails t unless every message that failed in rec
// failed with message.ErrHandlerExited and is one of the first n (its id
// is below n): those of the first unit ("chunk", "batch"), the one whose
// user code ended its goroutine.
func ExpectOnlyFirstExited(t testing.TB, rec *acker.Recorder, n uint64, unit string) {
	t.Helper()
	for _, o := range rec.Failed() {
		if !errors.Is(o.Err, message.ErrHandlerExited) || o.ID >= n {
			t.Errorf("message %d failed with %v; want only those of the first %s, with message.ErrHandlerExited", o.ID, o.Err, unit)
		}
	}
}
