// Package producer is the first stage of a pipeline: it runs a Source in one
// or more producer stages, keeps every consumer of the source within its
// permit window, applies the pipeline's rate limit, hands messages to the
// processors, and restarts a failing source with backoff.
//
// A source implements Source: Run feeds the pipeline through the Stage it
// is given, Info describes the source (ordering, the permit window it
// needs, whether its options are valid) and Close releases what it holds.
// Embedding Basic gives the plain Info and Close; a wrapper that embeds
// the source it wraps passes the whole contract on.
package producer

import (
	"cmp"
	"context"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/boulevard-go/boulevard/internal/group"
	"github.com/boulevard-go/boulevard/internal/release"
)

// runtimeConfig is what the pipeline gives its producer besides the user's options.
type runtimeConfig[T any] struct {
	// Name is the pipeline's name; stages are named "<Name>.producer.<i>".
	Name string
	// Logger receives the stages' logs. Nil means slog.Default().
	Logger *slog.Logger
	// Output is the processors' input.
	Output output[T]
	// Release is the pipeline's release signal, which Feed.FlushInFlight
	// begins. Nil means none: FlushInFlight does nothing.
	Release *release.Signal
}

// Producer runs the producer stages of one pipeline.
type runtime[T any] struct {
	opts   Options[T]
	stages []*Stage[T]
	gate   *gate
	log    *slog.Logger

	mu          sync.Mutex // guards fetchCancel and stopping
	fetchCancel context.CancelFunc
	stopping    bool // StopFetching was called
	stopOnce    sync.Once
	stopped     chan struct{}
	done        chan struct{}
	// abandoned is every stage's Abandoned, closed by Abandon.
	abandoned   chan struct{}
	abandonOnce sync.Once
}

// New prepares the producer stages. opts must already carry its defaults
// (Options.WithDefaults) and be validated; New starts nothing.
func newRuntime[T any](opts Options[T], cfg runtimeConfig[T]) *runtime[T] {
	log := cmp.Or(cfg.Logger, slog.Default())
	p := &runtime[T]{
		opts:      opts,
		gate:      newGate(opts.RateLimit),
		log:       log,
		stopped:   make(chan struct{}),
		done:      make(chan struct{}),
		abandoned: make(chan struct{}),
	}
	if opts.Source != nil {
		now := time.Now()
		for i := range opts.Concurrency {
			name := stageName(cfg.Name, i)
			p.stages = append(p.stages, &Stage[T]{
				index:     i,
				name:      name,
				log:       log.With(slog.String("stage", name)),
				flow:      opts.Flow,
				out:       cfg.Output,
				try:       tryOutput(cfg.Output),
				exits:     exitsOf(cfg.Output),
				gate:      p.gate,
				release:   cfg.Release,
				abandoned: p.abandoned,
				wake:      make(chan struct{}, 1),
				status:    StageStatus{Stage: name, State: StateStarting, Since: now},
				epoch:     now,
			})
		}
	}
	return p
}

// Stages returns the producer stages (none for a push-only pipeline).
func (p *runtime[T]) Stages() []*Stage[T] { return p.stages }

// Run runs, for each stage, the goroutine that runs the source and the
// goroutine that dispatches its buffer, and returns when all of them have
// returned (a push-only producer, which has no stage, returns once
// StopFetching is called or ctx is cancelled); Done is closed then. ctx is
// the pipeline's hard-stop context: when it is cancelled, dispatching stops
// and buffered messages stay unacknowledged. fatal is called (once per
// failing stage, from the stage's goroutine) when a stage gives up
// restarting its source. Call Run, or Start, once.
func (p *runtime[T]) Run(ctx context.Context, fatal func(error)) {
	fetchCtx, cancel := context.WithCancel(ctx)
	defer close(p.done)
	defer cancel()
	p.mu.Lock()
	p.fetchCancel = cancel
	if p.stopping {
		// StopFetching came before Run: the sources start stopped.
		cancel()
	}
	p.mu.Unlock()
	var g group.Group
	for _, s := range p.stages {
		s.mu.Lock()
		s.stop = ctx
		s.mu.Unlock()
		ran := make(chan struct{})
		g.Go(func() {
			defer close(ran)
			if err := s.run(fetchCtx, p.opts.Source, p.opts.Restart); err != nil {
				s.log.Error("producer stage gave up", withStack(err, slog.Any("error", err))...)
				fatal(err)
			}
		})
		d := newDispatcher(s)
		g.Go(func() { s.dispatchAndSettle(ctx, &g, d, ran, nil) })
	}
	g.Wait()
	if len(p.stages) == 0 {
		// A push-only pipeline has no source to exhaust: it is done when
		// it is told to stop.
		select {
		case <-p.stopped:
		case <-ctx.Done():
		}
	}
}

// dispatchAndSettle runs the stage's dispatching, then counts what it
// leaves behind once nothing more can be delivered to it: it waits for the
// source's runs to end (ran). When user code it calls (a feed's grant
// callback, the processors' PartitionBy) ends its goroutine
// (runtime.Goexit), which no recover catches, a new goroutine of g, which
// Run waits for like the others, finishes what this one was doing and
// goes on: one flag per goroutine, nothing per message.
//
// exited is the stack of the exit the goroutine takes over from (nil for
// the first one).
func (s *Stage[T]) dispatchAndSettle(ctx context.Context, g *group.Group, d *dispatcher[T], ran <-chan struct{}, exited []byte) {
	returned := false
	defer func() {
		if !returned {
			stack := debug.Stack()
			g.Go(func() { s.dispatchAndSettle(ctx, g, d, ran, stack) })
		}
	}()
	if exited != nil {
		d.dispatchExited(ctx, exited)
	}
	lost := s.dispatch(ctx, d)
	returned = true
	<-ran
	s.settle(lost)
}

// Start calls Run in a new goroutine that wg tracks, and returns at once.
// It is for running a source in producer stages outside a pipeline, as the
// sources' own tests do.
func (p *runtime[T]) Start(ctx context.Context, wg *sync.WaitGroup, fatal func(error)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.Run(ctx, fatal)
	}()
}

// Abandon closes every stage's Abandoned channel: the pipeline calls it
// once the stages have returned from a drain it cut short, before it closes
// the source. Safe to call more than once.
func (p *runtime[T]) Abandon() { p.abandonOnce.Do(func() { close(p.abandoned) }) }

// StopFetching tells every stage's source to stop fetching (its Run context
// is cancelled). Buffered messages are still dispatched. Safe to call more
// than once and before Start.
func (p *runtime[T]) StopFetching() {
	p.stopOnce.Do(func() {
		close(p.stopped)
		p.mu.Lock()
		p.stopping = true
		cancel := p.fetchCancel
		p.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	})
}

// Done is closed when Run returns: every stage has finished, its source's
// Run returned and its buffer was dispatched (or the hard-stop context was
// cancelled).
func (p *runtime[T]) Done() <-chan struct{} { return p.done }

// Close closes the source. Call it once, after every stage goroutine has
// returned (see Source). The source's Close runs on a goroutine of its
// own: a panic in it is returned as a *message.PanicError, and an exit
// (runtime.Goexit) as an *ExitError, both carrying the stack.
func (p *runtime[T]) Close(ctx context.Context) error {
	if p.opts.Source == nil {
		return nil
	}
	return call("Close", func() error { return p.opts.Source.Close(ctx) })
}

// SetRateLimit changes the rate limit shared by all stages; nil removes it.
// The caller validates rl.
func (p *runtime[T]) SetRateLimit(rl *RateLimit) { p.gate.set(rl) }

// RateLimit returns a copy of the rate limit in force, or nil when there is
// none.
func (p *runtime[T]) RateLimit() *RateLimit {
	b := p.gate.cur.Load()
	if b.lim == nil {
		return nil
	}
	rl := b.rl
	return &rl
}

// gate is the token bucket shared by all stages of a pipeline. Changing the
// limit keeps the tokens the bucket holds (so calling SetRateLimit again does
// not hand out a fresh burst) and wakes every stage waiting on it; switching
// from no limit to a limit starts a full bucket.
type gate struct {
	mu  sync.Mutex // serialises set
	cur atomic.Pointer[bucket]
}

// bucket is one rate limit; changed is closed when it is replaced.
type bucket struct {
	lim     *rate.Limiter // nil: unlimited
	rl      RateLimit
	changed chan struct{}
}

func newGate(rl *RateLimit) *gate {
	g := &gate{}
	g.set(rl)
	return g
}

func (g *gate) set(rl *RateLimit) {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.cur.Load()
	b := &bucket{changed: make(chan struct{})}
	switch {
	case rl == nil:
		if old != nil && old.lim == nil {
			return // unchanged
		}
	case old != nil && old.lim != nil:
		if old.rl == *rl {
			return // unchanged
		}
		b.lim, b.rl = old.lim, *rl
		now := time.Now()
		b.lim.SetLimitAt(now, rate.Limit(float64(rl.Allowed)/rl.Interval.Seconds()))
		b.lim.SetBurstAt(now, rl.Allowed)
	default:
		b.lim, b.rl = rate.NewLimiter(rate.Limit(float64(rl.Allowed)/rl.Interval.Seconds()), rl.Allowed), *rl
	}
	g.cur.Store(b)
	if old != nil {
		close(old.changed)
	}
}

// unlimited reports whether no rate limit is set.
func (g *gate) unlimited() bool { return g.cur.Load().lim == nil }

// tryOutput returns out as a directOutput when it is one.
func tryOutput[T any](out output[T]) directOutput[T] {
	t, _ := out.(directOutput[T])
	return t
}

// exitsOf returns out when user code it calls may end the goroutine that
// hands messages over, nil otherwise.
func exitsOf[T any](out output[T]) exitOutput[T] {
	e, _ := out.(exitOutput[T])
	return e
}

// take waits until some of n messages may pass and returns how many: all n
// when there is no limit, otherwise at most the bucket size. When the bucket
// holds a token or more it returns at once with what it holds, as Broadway
// passes what its rate limiter allows and buffers the rest; an empty bucket
// is waited on for min(n, bucket size) tokens, so that a stage under a
// steady limit hands over chunks, not a message per token. A limit changed
// while it waits applies at once.
//
// A reservation is kept until it is due: giving it back to look again would
// lose its tokens whenever another stage reserved after it (rate.Reservation
// restores only what nobody reserved since), and stages sharing the bucket
// would then starve each other.
func (g *gate) take(ctx context.Context, n int) (int, error) {
	for {
		b := g.cur.Load()
		if b.lim == nil {
			return n, nil
		}
		now := time.Now()
		k := min(n, b.lim.Burst())
		if held := int(b.lim.TokensAt(now)); held >= 1 {
			k = min(k, held)
		}
		r := b.lim.ReserveN(now, k)
		if !r.OK() {
			// k is within the burst read above: the limit was lowered
			// since (UpdateRateLimit and SetRateLimit change the bucket
			// in place). Reserve again under the new one.
			continue
		}
		d := r.Delay()
		if d == 0 {
			return k, nil
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
			return k, nil
		case <-b.changed:
			// The limit changed: reserve again under the new one.
			t.Stop()
			r.Cancel()
		case <-ctx.Done():
			t.Stop()
			r.Cancel()
			return 0, ctx.Err()
		}
	}
}
