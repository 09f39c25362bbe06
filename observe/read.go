package observe

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
)

// DefaultStatsTimeout is the default Options.StatsTimeout.
const DefaultStatsTimeout = 5 * time.Second

// MaxStatsTimeout is the longest Options.StatsTimeout.
const MaxStatsTimeout = time.Minute

// ErrStats is wrapped by the error reporting a thing added whose Stats
// could not be read: it panicked, or did not return within
// Options.StatsTimeout. The error names the thing (a pipeline by the
// name it was added under, a Kafka source by its place among those
// added, a topic or a Pulsar subscription by its name). Add, Replace and
// AddKafka, which read a Stats before the thing is added, return such an
// error naming it by its place among their arguments ("pipelines[1]",
// "sources[0]"), or, for Replace, as "the pipeline".
var ErrStats = errors.New("observe: reading stats failed")

// guard is what the Observer keeps of one thing added between reads of
// its Stats: the latest call, so that a call that has not returned is
// shared by the reads that come while it is young and not repeated once
// it is late (a Stats that never returns holds one goroutine, not one
// per scrape).
type guard[S any] struct {
	latest atomic.Pointer[call[S]]
}

// call is one call of a Stats method, run on a goroutine of its own that
// ends when Stats returns (or panics).
type call[S any] struct {
	what  string
	since time.Time
	done  chan struct{}
	// st and err are set before done is closed.
	st  S
	err error
}

// start returns the call of f to wait for: the latest one when it has
// not returned and started less than timeout ago, else a new one. A call
// that has not returned after timeout is not waited for: the one
// returned is done already, with its error.
func (g *guard[S]) start(what string, timeout time.Duration, f func() S) *call[S] {
	prev := g.latest.Load()
	if prev != nil {
		select {
		case <-prev.done:
		default:
			if time.Since(prev.since) < timeout {
				return prev
			}
			c := &call[S]{what: what, done: make(chan struct{}),
				err: fmt.Errorf("%w: %s: Stats has not returned since %s", ErrStats, what, prev.since.UTC().Format(time.RFC3339))}
			close(c.done)
			return c
		}
	}
	c := &call[S]{what: what, since: time.Now(), done: make(chan struct{})}
	if !g.latest.CompareAndSwap(prev, c) {
		return g.latest.Load() // another read started one meanwhile
	}
	go c.run(f)
	return c
}

// run calls f, recovering a panic as c's error.
func (c *call[S]) run(f func() S) {
	defer close(c.done)
	defer func() {
		if r := recover(); r != nil {
			c.err = fmt.Errorf("%w: %s: Stats panicked: %v", ErrStats, c.what, r)
		}
	}()
	c.st = f()
}

// wait returns c's stats, or its error; an error wrapping ErrStats when
// ctx, which ends after timeout at the latest, ends first.
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
		if ctx.Err() == context.DeadlineExceeded {
			return zero, fmt.Errorf("%w: %s: Stats did not return within %v", ErrStats, c.what, timeout)
		}
		return zero, fmt.Errorf("%w: %s: %w", ErrStats, c.what, context.Cause(ctx))
	}
}

// statsCall is one Stats to read while adding something: f, called
// through g, named what in its error.
type statsCall[S any] struct {
	g    *guard[S]
	what string
	f    func() S
}

// readNow calls each of cs as read does (through its guard, on a
// goroutine of its own, a panic recovered), all at once, and waits for
// them until timeout ends: it returns the stats of each, or the error,
// wrapping ErrStats, that kept it from being read.
func readNow[S any](timeout time.Duration, cs []statsCall[S]) ([]S, []error) {
	if len(cs) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	calls := make([]*call[S], len(cs))
	for i, c := range cs {
		calls[i] = c.g.start(c.what, timeout, c.f)
	}
	sts, errs := make([]S, len(cs)), make([]error, len(cs))
	for i, c := range calls {
		sts[i], errs[i] = c.wait(ctx, timeout)
	}
	return sts, errs
}

// reading is one read of the Stats of everything added, each with the
// error that kept it from being read.
type reading struct {
	pipes  []pipeRead
	kafka  []kafka.Stats
	topics []topicRead
	pulsar []pulsarRead
	// errs are the errors of the Kafka sources, topics and Pulsar
	// sources that could not be read (those of pipelines are in pipes).
	errs []error
}

type pipeRead struct {
	// name is the name the pipeline was added under (as exported).
	name string
	st   pipeline.Stats
	err  error
}

type topicRead struct {
	t  namedTopic
	st topic.Stats
}

type pulsarRead struct {
	subscription string
	st           pulsar.Stats
}

// read calls the Stats of everything added, each on a goroutine of its
// own, and waits for them until o's stats timeout, or ctx, ends: a Stats
// that panics, or has not returned by then, is reported by an error
// wrapping ErrStats, and the others are read all the same.
func (o *Observer) read(ctx context.Context) reading {
	pipes, kafkas, topics := o.snapshot()
	pulsars := o.pulsarSources()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	pc := make([]*call[pipeline.Stats], len(pipes))
	for i, p := range pipes {
		pc[i] = p.g.start(fmt.Sprintf("pipeline %q", p.name), o.timeout, p.p.Stats)
	}
	kc := make([]*call[kafka.Stats], len(kafkas))
	for i, k := range kafkas {
		kc[i] = k.g.start(fmt.Sprintf("Kafka source %d", i), o.timeout, k.s.Stats)
	}
	tc := make([]*call[topic.Stats], len(topics))
	for i, t := range topics {
		tc[i] = t.g.start(fmt.Sprintf("topic %q", labelValue(t.name)), o.timeout, t.t.Stats)
	}
	uc := make([]*call[pulsar.Stats], len(pulsars))
	for i, p := range pulsars {
		uc[i] = p.g.start(fmt.Sprintf("Pulsar subscription %q", labelValue(p.subscription)), o.timeout, p.s.Stats)
	}

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
	r.topics = make([]topicRead, 0, len(tc))
	for i, c := range tc {
		if st, err := c.wait(ctx, o.timeout); err != nil {
			r.errs = append(r.errs, err)
		} else {
			r.topics = append(r.topics, topicRead{topics[i], st})
		}
	}
	r.pulsar = make([]pulsarRead, 0, len(uc))
	for i, c := range uc {
		if st, err := c.wait(ctx, o.timeout); err != nil {
			r.errs = append(r.errs, err)
		} else {
			r.pulsar = append(r.pulsar, pulsarRead{pulsars[i].subscription, st})
		}
	}
	return r
}
