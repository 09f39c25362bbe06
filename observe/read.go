package observe

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/kafkatopology"
)

// DefaultStatsTimeout is the default Options.StatsTimeout.
const DefaultStatsTimeout = 5 * time.Second

// MaxStatsTimeout is the longest Options.StatsTimeout.
const MaxStatsTimeout = time.Minute

// ErrStats is wrapped by the error reporting a thing added whose Stats
// could not be read: it panicked, or did not return within
// Options.StatsTimeout. The error names the thing (a pipeline by the
// name it was added under, a Kafka source by its place among those
// added, a topic, a Pulsar subscription, a topology source or a Kafka
// topology backend by its name). Add, Replace and AddKafka, which read a
// Stats before the thing is added, return such an error naming it by its
// place among their arguments ("pipelines[1]", "sources[0]"), or, for
// Replace, as "the pipeline". The error of a Stats that panicked also
// wraps the panic's *message.PanicError (so errors.Is matches the panic
// value when it is an error).
var ErrStats = errors.New("observe: reading stats failed")

// ErrStatsPending is wrapped, with ErrStats, by the error reporting a
// thing whose Stats is not called because an earlier call of it has not
// returned: a read that comes when that call has been running for
// Options.StatsTimeout or longer, and an Add, Replace or AddKafka that
// comes after an earlier one gave up waiting for that call. Such a read,
// or call, returns at once, and the Stats is called again only once the
// earlier call has returned: a Stats that never returns holds one
// goroutine, however often it is read or its pipeline is added again.
var ErrStatsPending = errors.New("observe: Stats has not returned")

// ErrClosed is returned by Add, Replace, AddKafka, AddTopic, AddPulsar,
// AddTopology, AddKafkaTopology and Serve once Close has been called, and
// wrapped (with ErrStats) by the error reporting each thing that a read
// after Close does not read.
var ErrClosed = errors.New("observe: observer closed")

// ErrNilContext is returned by Add, Replace, AddKafka, Serve and Close
// for a nil context, before they do anything: nothing is added or
// served, and Close leaves the Observer open.
var ErrNilContext = errors.New("observe: nil context")

// errTimedOut is the cause of the end of a read's context when
// Options.StatsTimeout ends it.
var errTimedOut = errors.New("observe: stats timeout")

// calls keeps the Stats calls of an Observer that are running, so that
// Close can wait for them, and refuses new ones once Close is called.
type calls struct {
	mu     sync.Mutex
	closed bool
	// running holds the exited channel of each call running.
	running map[chan struct{}]struct{}
}

// begin records a call whose goroutine closes exited when it ends, and
// reports whether it may start: false once Close is called.
func (cs *calls) begin(exited chan struct{}) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return false
	}
	if cs.running == nil {
		cs.running = map[chan struct{}]struct{}{}
	}
	cs.running[exited] = struct{}{}
	return true
}

// end closes exited and forgets the call that begin recorded with it.
func (cs *calls) end(exited chan struct{}) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.running, exited)
	close(exited)
}

// close refuses new calls, and returns the exited channels of those
// running.
func (cs *calls) close() []chan struct{} {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.closed = true
	return slices.Collect(maps.Keys(cs.running))
}

func (cs *calls) isClosed() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.closed
}

// Close refuses everything added from now on (Add, Replace, AddKafka,
// AddTopic, AddPulsar, AddTopology and AddKafkaTopology return
// ErrClosed) and every new Server (Serve returns ErrClosed), makes every later read (scrapes, checks, /stats, Snapshot)
// report what is added as failed without calling its Stats, and waits
// until each Stats call the Observer has started has returned, or ctx
// ends. It returns nil once
// they have all returned (their goroutines ended), or, when ctx ends
// first, an error wrapping ErrStatsPending and ctx.Err() (and ctx's
// cause, when it was given one) that counts
// the calls still running; those goroutines end when their Stats
// returns, which the Observer cannot hasten. Close may be called more
// than once: each call waits the same way. A nil ctx returns
// ErrNilContext and leaves the Observer as it was, open: call Close again
// with a context.
func (o *Observer) Close(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	running := o.calls.close()
	for i, exited := range running {
		select {
		case <-exited:
		case <-ctx.Done():
			left := 0
			for _, e := range running[i:] {
				select {
				case <-e:
				default:
					left++
				}
			}
			if left == 0 {
				return nil
			}
			return fmt.Errorf("%w: %d Stats calls still running: %w", ErrStatsPending, left, ended(ctx))
		}
	}
	return nil
}

// guard is what the Observer keeps of one thing (or, while it is being
// added, of one value, see pending) between reads of its Stats: the
// latest call, so that a call that has not returned is shared by the
// reads that come while it is young and not repeated once it is late or
// abandoned (a Stats that never returns holds one goroutine, not one per
// scrape or per Add).
type guard[S any] struct {
	latest atomic.Pointer[call[S]]
}

// call is one call of a Stats method, run on a goroutine of its own that
// ends when Stats returns (or panics).
type call[S any] struct {
	what  string
	since time.Time
	done  chan struct{}
	// exited is closed when the call's goroutine ends (after done).
	exited chan struct{}
	// abandoned is set when an Add, Replace or AddKafka gave up waiting
	// for the call: later ones do not wait for it.
	abandoned atomic.Bool
	// st and err are set before done is closed.
	st  S
	err error
}

// failedCall returns a call done already, with err.
func failedCall[S any](what string, err error) *call[S] {
	c := &call[S]{what: what, done: make(chan struct{}), err: err}
	close(c.done)
	return c
}

// start returns the call of f to wait for: the latest one when it has
// not returned, started less than timeout ago and was not abandoned,
// else a new one. A call that has not returned after timeout, or that
// was abandoned, is not waited for: the one returned is done already,
// with an error wrapping ErrStatsPending. Once cs is closed, no call is
// started: the one returned is done, with an error wrapping ErrClosed.
func (g *guard[S]) start(cs *calls, what string, timeout time.Duration, f func() S) *call[S] {
	prev := g.latest.Load()
	if prev != nil {
		select {
		case <-prev.done:
		default:
			if !prev.abandoned.Load() && time.Since(prev.since) < timeout {
				return prev
			}
			return failedCall[S](what, fmt.Errorf("%w: %s: %w since %s", ErrStats, what, ErrStatsPending, prev.since.UTC().Format(time.RFC3339)))
		}
	}
	c := &call[S]{what: what, since: time.Now(), done: make(chan struct{}), exited: make(chan struct{})}
	if !cs.begin(c.exited) {
		return failedCall[S](what, fmt.Errorf("%w: %s: %w", ErrStats, what, ErrClosed))
	}
	if !g.latest.CompareAndSwap(prev, c) {
		cs.end(c.exited)
		return g.latest.Load() // another read started one meanwhile
	}
	go c.run(cs, f)
	return c
}

// run calls f, recovering a panic as c's error; an end of the goroutine
// in f (runtime.Goexit, as t.FailNow does) is c's error too, rather than
// the zero stats read as f's.
func (c *call[S]) run(cs *calls, f func() S) {
	defer cs.end(c.exited)
	defer close(c.done)
	returned := false
	var perr error
	defer func() {
		if pe, ok := perr.(*message.PanicError); ok {
			c.err = panicked(fmt.Errorf("%w: %s: Stats panicked: %v", ErrStats, c.what, pe.Value), pe)
		} else if !returned {
			c.err = fmt.Errorf("%w: %s: Stats ended its goroutine (runtime.Goexit)", ErrStats, c.what)
		}
	}()
	defer message.Recover(&perr)
	c.st = f()
	returned = true
}

// panickedError is err, which says that user code panicked, carrying that
// panic's *message.PanicError, so that errors.As finds it and errors.Is
// the panic value when it is an error; its message is err's.
type panickedError struct {
	err error
	pe  *message.PanicError
}

// panicked returns err carrying pe (see panickedError).
func panicked(err error, pe *message.PanicError) error { return &panickedError{err: err, pe: pe} }

// Error is the message of the error saying that user code panicked.
func (e *panickedError) Error() string { return e.err.Error() }

// Unwrap returns the error saying that user code panicked and the panic's
// *message.PanicError.
func (e *panickedError) Unwrap() []error { return []error{e.err, e.pe} }

// wait returns c's stats, or its error; an error wrapping ErrStats when
// ctx ends first (errTimedOut its cause when timeout ended it).
func (c *call[S]) wait(ctx context.Context, timeout time.Duration) (S, error) {
	select { // a call done is read even when ctx has ended meanwhile
	case <-c.done:
		return c.st, c.err
	default:
	}
	select {
	case <-c.done:
		return c.st, c.err
	case <-ctx.Done():
		var zero S
		if context.Cause(ctx) != errTimedOut {
			return zero, fmt.Errorf("%w: %s: %w", ErrStats, c.what, ended(ctx))
		}
		return zero, fmt.Errorf("%w: %s: Stats did not return within %v", ErrStats, c.what, timeout)
	}
}

// ended is the error of ctx, which has ended: ctx.Err(), and its cause
// too when it was given one (context.WithCancelCause, WithTimeoutCause),
// so that errors.Is finds both.
func ended(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}

// statsCall is one Stats to read while adding something: f, called
// through g, named what in its error. A nil g refuses it, with an error
// wrapping ErrStatsPending, without a call (see pending.guard).
type statsCall[S any] struct {
	g    *guard[S]
	what string
	f    func() S
}

// readNow calls each of cs as read does (through its guard, on a
// goroutine of its own, a panic recovered), all at once, and waits for
// them until ctx or timeout ends: it returns the stats of each, or the
// error, wrapping ErrStats, that kept it from being read. A call it
// gave up waiting for is abandoned: no later Add waits for it (see
// start).
func readNow[S any](ctx context.Context, timeout time.Duration, cs *calls, scs []statsCall[S]) ([]S, []error) {
	if len(scs) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errTimedOut)
	defer cancel()
	calls := make([]*call[S], len(scs))
	for i, c := range scs {
		if c.g == nil {
			calls[i] = failedCall[S](c.what, fmt.Errorf("%w: %s: %w (that of a value whose type cannot be compared, which an earlier call gave up on)", ErrStats, c.what, ErrStatsPending))
			continue
		}
		calls[i] = c.g.start(cs, c.what, timeout, c.f)
	}
	sts, errs := make([]S, len(scs)), make([]error, len(scs))
	for i, c := range calls {
		sts[i], errs[i] = c.wait(ctx, timeout)
		select {
		case <-c.done:
		default:
			c.abandoned.Store(true)
		}
	}
	return sts, errs
}

// pending keeps the guards through which Add, Replace and AddKafka read
// the Stats of values that are not added (or, for AddKafka, given twice),
// so that a value whose Stats has not returned is not called again by a
// later one: one guard per value, by identity, while its latest call
// has not returned. A value whose type cannot be compared has no
// identity: each gets a guard of its own, kept in anon while its call
// has not returned, and while one of those was abandoned, no such value
// is read (its guard is nil). The Observer's mu guards it.
type pending[S any] struct {
	byValue map[any]*guard[S]
	anon    []*guard[S]
}

// guard returns the guard to read v's Stats through: nil when v's type
// cannot be compared and the call of another such value was abandoned.
// It first forgets the guards whose call has returned.
func (p *pending[S]) guard(v any) *guard[S] {
	for k, g := range p.byValue {
		if returned(g) {
			delete(p.byValue, k)
		}
	}
	p.anon = slices.DeleteFunc(p.anon, returned[S])
	if hasIdentity(v) {
		if g, ok := p.byValue[v]; ok {
			return g
		}
		if p.byValue == nil {
			p.byValue = map[any]*guard[S]{}
		}
		g := new(guard[S])
		p.byValue[v] = g
		return g
	}
	if slices.ContainsFunc(p.anon, abandoned[S]) {
		return nil
	}
	g := new(guard[S])
	p.anon = append(p.anon, g)
	return g
}

// returned reports whether g's latest call has returned; false when
// there is none yet (its call is being started).
func returned[S any](g *guard[S]) bool {
	c := g.latest.Load()
	if c == nil {
		return false
	}
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// hasIdentity reports whether v can key a map: its dynamic type, and
// each value it holds, can be compared.
func hasIdentity(v any) bool { return v != nil && reflect.ValueOf(v).Comparable() }

// abandoned reports whether g's latest call was abandoned and has not
// returned.
func abandoned[S any](g *guard[S]) bool {
	c := g.latest.Load()
	return c != nil && c.abandoned.Load() && !returned(g)
}

// reading is one read of the Stats of everything added, each with the
// error that kept it from being read.
type reading struct {
	pipes           []pipeRead
	kafka           []kafka.Stats
	topics          []readOf[namedTopic, topic.Stats]
	pulsar          []readOf[namedPulsar, pulsar.Stats]
	topologies      []readOf[namedTopology, topology.Stats]
	kafkaTopologies []readOf[namedKafkaTopology, kafkatopology.Stats]
	// errs are the errors of the things other than pipelines that could
	// not be read (those of pipelines are in pipes).
	errs []error
}

type pipeRead struct {
	// name is the name the pipeline was added under (as exported).
	name string
	st   pipeline.Stats
	err  error
}

// readOf is one thing added, e, and the stats read of it.
type readOf[E, S any] struct {
	e  E
	st S
}

// read calls the Stats of everything added, each on a goroutine of its
// own, and waits for them until o's stats timeout, or ctx, ends: a Stats
// that panics, or has not returned by then, is reported by an error
// wrapping ErrStats, and the others are read all the same.
func (o *Observer) read(ctx context.Context) reading {
	pipes, kafkas := o.snapshot()
	topics, pulsars, topologies, kafkaTopologies := o.named()
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, errTimedOut)
	defer cancel()

	pc := make([]*call[pipeline.Stats], len(pipes))
	for i, p := range pipes {
		pc[i] = p.g.start(&o.calls, fmt.Sprintf("pipeline %q", p.name), o.timeout, p.p.Stats)
	}
	kc := make([]*call[kafka.Stats], len(kafkas))
	for i, k := range kafkas {
		kc[i] = k.g.start(&o.calls, fmt.Sprintf("Kafka source %d", i), o.timeout, k.s.Stats)
	}
	tc := startAll(o, topics, func(t namedTopic) (string, *guard[topic.Stats], func() topic.Stats) {
		return fmt.Sprintf("topic %q", labelValue(t.name)), t.g, t.t.Stats
	})
	uc := startAll(o, pulsars, func(p namedPulsar) (string, *guard[pulsar.Stats], func() pulsar.Stats) {
		return fmt.Sprintf("Pulsar subscription %q", labelValue(p.subscription)), p.g, p.s.Stats
	})
	yc := startAll(o, topologies, func(t namedTopology) (string, *guard[topology.Stats], func() topology.Stats) {
		return fmt.Sprintf("topology %q", labelValue(t.name)), t.g, t.t.Stats
	})
	bc := startAll(o, kafkaTopologies, func(b namedKafkaTopology) (string, *guard[kafkatopology.Stats], func() kafkatopology.Stats) {
		return fmt.Sprintf("Kafka topology backend %q", labelValue(b.name)), b.g, b.b.Stats
	})

	var r reading
	r.pipes = make([]pipeRead, len(pipes))
	for i, c := range pc {
		st, err := c.wait(ctx, o.timeout)
		r.pipes[i] = pipeRead{name: pipes[i].name, st: st, err: err}
	}
	r.kafka = make([]kafka.Stats, 0, len(kc))
	for _, c := range kc {
		if st, err := c.wait(ctx, o.timeout); err != nil {
			r.errs = append(r.errs, err)
		} else {
			r.kafka = append(r.kafka, st)
		}
	}
	r.topics = waitAll(ctx, o.timeout, topics, tc, &r.errs)
	r.pulsar = waitAll(ctx, o.timeout, pulsars, uc, &r.errs)
	r.topologies = waitAll(ctx, o.timeout, topologies, yc, &r.errs)
	r.kafkaTopologies = waitAll(ctx, o.timeout, kafkaTopologies, bc, &r.errs)
	return r
}

// startAll starts the Stats call of each of list (see guard.start): that
// of e named what in its error, read through g with f, as of(e) returns
// them.
func startAll[E, S any](o *Observer, list []E, of func(e E) (what string, g *guard[S], f func() S)) []*call[S] {
	cs := make([]*call[S], len(list))
	for i, e := range list {
		what, g, f := of(e)
		cs[i] = g.start(&o.calls, what, o.timeout, f)
	}
	return cs
}

// waitAll waits for each of cs, the calls of list (see call.wait), and
// returns, in list's order, those whose stats were read; it appends the
// errors of the others to *errs.
func waitAll[E, S any](ctx context.Context, timeout time.Duration, list []E, cs []*call[S], errs *[]error) []readOf[E, S] {
	out := make([]readOf[E, S], 0, len(cs))
	for i, c := range cs {
		if st, err := c.wait(ctx, timeout); err != nil {
			*errs = append(*errs, err)
		} else {
			out = append(out, readOf[E, S]{list[i], st})
		}
	}
	return out
}
