package topologytest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testsize"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// ChurnRoundsEnv is the environment variable that sets how many times
// RollingRestart replaces every instance (1 when unset).
const ChurnRoundsEnv = "BOULEVARD_CHURN_ROUNDS"

// ChurnConfig describes the backend RollingRestart runs on.
type ChurnConfig struct {
	// NewBackend returns a new backend over the broker under test, with a
	// client of its own, as another process would make. RollingRestart
	// closes each one it made before it returns. Required.
	NewBackend func(t *testing.T) topology.Backend[Msg]
	// Instances is how many pipelines read the topology's group at once.
	// Default 3.
	Instances int
	// OneToFinish stops every instance once the rolling restart is over
	// and starts one alone to handle what is left: a backend that keeps a
	// sequenced group's order under one consumer at a time (Pulsar's
	// Key_Shared hold topics, which may hand a key's retry to a consumer
	// other than the one holding the key's later letters until that one
	// stops) ends a deploy that way.
	OneToFinish bool
	// Bound bounds every wait. Default 2 minutes.
	Bound time.Duration
}

// The churn topology's keys, and how a letter fares: the handler decides
// from the letter's key, number and retry count alone, so every delivery
// of a letter, a repeated one included, is decided alike.
const (
	churnKeys = 20
	// churnSlowWork is how long the handler works on a slow letter: long
	// enough for a stop with a short deadline to cut it.
	churnSlowWork = 150 * time.Millisecond
	// churnStep is how many letters are handled successfully between two
	// steps of the rolling restart.
	churnStep = 40
	// churnBacklog bounds the letters published and not settled yet,
	// so that the instances keep up with the publisher.
	churnBacklog = 100
)

func churnKey(i int) string { return fmt.Sprintf("k%02d", i) }

// churnFate says what the handler does with letter n of key index k: how
// many times it retries it before it succeeds, whether it rejects it (to
// the DLQ), and whether it works on it a while first.
func churnFate(k, n int) (retries int, reject, slow bool) {
	v := n + 3*k
	switch {
	case v%13 == 7:
		reject = true
	case v%5 == 2:
		retries = 1
	case v%17 == 3:
		retries = 2
	}
	return retries, reject, v%11 == 4
}

// churnOutcome is what one handler call did.
type churnOutcome int

const (
	churnAcked churnOutcome = iota
	churnRetried
	churnRejected
	churnInterrupted
)

func (o churnOutcome) String() string {
	return [...]string{"acked", "retried", "rejected", "interrupted"}[o]
}

// churnCall is one handler call.
type churnCall struct {
	Msg
	retries int
	inst    int
	// start and end order the calls: a counter shared by every call.
	start, end int64
	outcome    churnOutcome
}

func (c churnCall) String() string {
	return fmt.Sprintf("%v(retries %d, instance %d, %s)", c.Msg, c.retries, c.inst, c.outcome)
}

// churn is RollingRestart's state.
type churn struct {
	t     *testing.T
	cfg   ChurnConfig
	top   *topology.Topology
	clock atomic.Int64
	// acked counts the letters handled successfully for the first time,
	// settled the letters published whose fate is sealed (acked, or seen
	// in the DLQ when the handler rejects them).
	acked, settled atomic.Int64

	mu        sync.Mutex
	calls     []churnCall
	published [churnKeys]int
	done      map[Msg]bool
	dead      map[Msg][]string // reasons, one per dead letter read
	// moves are the assignments each instance's readers told of
	// (topology.ShardNotifier), in the order told.
	moves map[int][]churnMove
}

// churnInstance is one process: a backend of its own and a pipeline over
// a Source of the topology's group.
type churnInstance struct {
	id   int
	be   topology.Backend[Msg]
	p    *pipeline.Pipeline[Msg, Msg]
	slow atomic.Int32 // slow letters in its handlers
	// calls counts its handler calls.
	calls atomic.Int64
}

// RollingRestart checks that a sequenced topology keeps its promises
// while the members of its group come and go, as in a rolling deploy.
// Instances pipelines, each over a backend of its own, read one sequenced
// topology (a 1s hold, a DLQ, policy Skip) while a publisher writes
// letters numbered per key for 20 keys. Handlers retry some letters once
// or twice, reject some to the DLQ and work a while on some. Then, while
// the publisher goes on, each instance in turn is stopped (every other
// stop with a deadline short enough to cut its drain, once a slow letter
// is in its handlers) and replaced by a new one, every instance once per
// round (BOULEVARD_CHURN_ROUNDS, default 1). Once the publisher stopped,
// every letter must be either handled successfully or read from the DLQ,
// as its handler decided, within Bound; and for each key, in the order
// of the handler calls:
//
//   - no two calls of one instance overlap (one letter per key at a
//     time);
//   - a letter handled successfully again was so before, in a call that
//     had ended (the documented at-least-once delivery);
//   - a letter handled successfully for the first time after a later
//     letter of its key was is a retried one (its retry count is above
//     0), and the later letters were handled by another instance than
//     the one that last sent it out (to a hold queue, or back to the
//     group when a stop interrupted it), or by that one once the key
//     moved away from it: its reader told of an assignment without the
//     key's shard (topology.ShardNotifier) after the call that sent the
//     retry out, or as the last one during that call: a retry out while
//     its key moved to another member, the one exception the
//     documentation makes. No
//     instance handles a later letter of a key while a letter of the key
//     it sent out has not come back, unless the key moved away from it
//     meanwhile.
//
// The caller checks for leaked goroutines once it returns: every backend
// it made is closed then.
func RollingRestart(t *testing.T, cfg ChurnConfig) {
	t.Helper()
	if cfg.Instances == 0 {
		cfg.Instances = 3
	}
	if cfg.Bound == 0 {
		cfg.Bound = 2 * time.Minute
	}
	rounds := testsize.Count(t, ChurnRoundsEnv, 1, 1)
	top, err := topology.New("churn").Sequenced(topology.Skip).Hold(time.Second).DLQ().Build()
	if err != nil {
		t.Fatal(err)
	}
	c := &churn{t: t, cfg: cfg, top: top, done: map[Msg]bool{}, dead: map[Msg][]string{}, moves: map[int][]churnMove{}}
	begin := time.Now()

	pubBe := c.cfg.NewBackend(c.t)
	q := c.declare(pubBe)
	deadStop := c.deadReader()
	pubCtx, stopPub := context.WithCancel(t.Context())
	pubDone := make(chan error, 1)
	go func() { pubDone <- c.publish(pubCtx, q) }()
	stopPublisher := sync.OnceValue(func() error {
		stopPub()
		return <-pubDone
	})
	defer stopPublisher()
	ins := make([]*churnInstance, cfg.Instances)
	next := 0
	for i := range ins {
		ins[i] = c.start(next)
		next++
	}

	cuts := 0
	for r := range rounds {
		for i := range ins {
			c.progress(fmt.Sprintf("round %d, instance %d", r, ins[i].id))
			cut := (r*len(ins)+i)%2 == 1
			t.Logf("%v: stopping instance %d (cut: %t)", time.Since(begin).Round(time.Millisecond), ins[i].id, cut)
			if c.stop(ins[i], cut) {
				cuts++
			}
			ins[i] = c.start(next)
			next++
		}
	}
	t.Logf("%v: the rolling restart is over", time.Since(begin).Round(time.Millisecond))
	c.progress("the last instances")
	if err := stopPublisher(); err != nil {
		t.Fatalf("publishing: %v", err)
	}
	if cfg.OneToFinish {
		for _, in := range ins {
			c.stop(in, false)
		}
		ins = []*churnInstance{c.start(next)}
	}
	c.mu.Lock()
	published := c.publishedLocked()
	c.mu.Unlock()
	t.Logf("%v: %d letters published", time.Since(begin).Round(time.Millisecond), published)
	wait.Within(t, cfg.Bound, "every letter handled or in the DLQ", func() bool {
		return c.settled.Load() == int64(published)
	}, c.missing)
	t.Logf("%v: every letter handled or in the DLQ", time.Since(begin).Round(time.Millisecond))
	// The last instances stop together, as at the end of a deploy.
	var stops sync.WaitGroup
	for _, in := range ins {
		stops.Go(func() { c.stop(in, false) })
	}
	stops.Wait()
	deadStop()
	MustClose(t, "the publisher's backend", pubBe.Close)
	c.mu.Lock()
	calls := len(c.calls)
	c.mu.Unlock()
	t.Logf("%d letters of %d keys, %d handler calls, %d instances in all, %d stops cut short, in %v",
		published, churnKeys, calls, next, cuts, time.Since(begin).Round(time.Millisecond))
	c.check()
}

func (c *churn) declare(be topology.Backend[Msg]) topology.Queues[Msg] {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), c.cfg.Bound)
	defer cancel()
	q, err := be.Declare(ctx, c.top)
	if err != nil {
		c.t.Fatalf("Declare: %v", err)
	}
	return q
}

// publish writes letters round the keys, numbered from 1 per key, one
// every few milliseconds while fewer than churnBacklog are not settled,
// until ctx ends.
func (c *churn) publish(ctx context.Context, q topology.Queues[Msg]) error {
	pub, err := topology.NewPublisher(q, topology.PublisherOptions[Msg]{Key: func(m Msg) string { return m.Key }})
	if err != nil {
		return err
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		k := i % churnKeys
		c.mu.Lock()
		m := Msg{Key: churnKey(k), N: c.published[k] + 1}
		backlog := c.publishedLocked() - int(c.settled.Load())
		c.mu.Unlock()
		if backlog >= churnBacklog {
			continue
		}
		i++
		// A publish under way finishes (its letter is then counted)
		// within Bound, whatever ctx.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Bound)
		err := pub.Publish(pctx, m)
		cancel()
		if err != nil {
			return fmt.Errorf("publish %v: %w", m, err)
		}
		c.mu.Lock()
		c.published[k] = m.N
		c.mu.Unlock()
	}
}

// publishedLocked returns how many letters were published.
func (c *churn) publishedLocked() int {
	n := 0
	for _, p := range c.published {
		n += p
	}
	return n
}

// start starts instance id: a backend, a declaration and a pipeline.
func (c *churn) start(id int) *churnInstance {
	c.t.Helper()
	in := &churnInstance{id: id, be: c.cfg.NewBackend(c.t)}
	q := movesQueues{Queues: c.declare(in.be), c: c, inst: id}
	src, err := topology.NewSource(topology.SourceOptions[Msg]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		c.t.Fatal(err)
	}
	in.p, err = pipeline.New(pipeline.Options[Msg, Msg]{
		Name:     fmt.Sprint("churn-", id),
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[Msg]{Source: src},
		Processors: processor.Options[Msg, Msg]{
			Concurrency: 4,
			Handle: func(ctx context.Context, m *message.Message[Msg]) (Msg, error) {
				return m.Data, c.handle(ctx, in, m)
			},
		},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	if err := in.p.Start(c.t.Context()); err != nil {
		c.t.Fatalf("Start: %v", err)
	}
	// The new member has joined once it handles its first letter.
	wait.Within(c.t, c.cfg.Bound, fmt.Sprintf("instance %d's first letter", id), func() bool {
		return in.calls.Load() > 0
	}, c.missing)
	return in
}

// handle is the instances' handler: it does what churnFate says and
// records the call.
func (c *churn) handle(ctx context.Context, in *churnInstance, m *message.Message[Msg]) error {
	in.calls.Add(1)
	call := churnCall{Msg: m.Data, inst: in.id, start: c.clock.Add(1)}
	d, _ := topology.DeliveryOf(m)
	if d != nil {
		call.retries = d.Retries
	}
	var k int
	if _, err := fmt.Sscanf(m.Data.Key, "k%d", &k); err != nil {
		return topology.Reject(err)
	}
	retries, reject, slow := churnFate(k, m.Data.N)
	var err error
	if slow {
		in.slow.Add(1)
		work := time.NewTimer(churnSlowWork)
		select {
		case <-work.C:
		case <-ctx.Done():
			work.Stop()
			err = ctx.Err()
			call.outcome = churnInterrupted
		}
		in.slow.Add(-1)
	}
	switch {
	case err != nil:
	case reject:
		err, call.outcome = topology.Reject(errors.New("refused")), churnRejected
	case call.retries < retries:
		err, call.outcome = topology.Retry(errFlaky), churnRetried
	default:
		call.outcome = churnAcked
	}
	call.end = c.clock.Add(1)
	c.mu.Lock()
	c.calls = append(c.calls, call)
	if call.outcome == churnAcked && !c.done[call.Msg] {
		c.done[call.Msg] = true
		c.acked.Add(1)
		c.settled.Add(1)
	}
	c.mu.Unlock()
	return err
}

// deadReader runs a pipeline over the topology's DLQ, with a backend of
// its own, recording every dead letter; the function it returns stops it.
func (c *churn) deadReader() func() {
	c.t.Helper()
	be := c.cfg.NewBackend(c.t)
	q := c.declare(be)
	src, err := topology.NewDeadSource(topology.SourceOptions[Msg]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		c.t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Options[Msg, Msg]{
		Name:     "churn-dead",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[Msg]{Source: src},
		Processors: processor.Options[Msg, Msg]{
			Handle: func(_ context.Context, m *message.Message[Msg]) (Msg, error) {
				reason := "no death"
				if d, _ := topology.DeliveryOf(m); d != nil && d.Death != nil {
					reason = string(d.Death.Reason)
				}
				c.mu.Lock()
				c.dead[m.Data] = append(c.dead[m.Data], reason)
				if len(c.dead[m.Data]) == 1 {
					c.settled.Add(1)
				}
				c.mu.Unlock()
				return m.Data, nil
			},
		},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	if err := p.Start(c.t.Context()); err != nil {
		c.t.Fatalf("Start: %v", err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.t.Context()), c.cfg.Bound)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			c.t.Errorf("stopping the DLQ's pipeline: %v", err)
		}
		MustClose(c.t, "the DLQ pipeline's backend", be.Close)
	}
}

// progress waits until churnStep more letters were handled successfully
// for the first time.
func (c *churn) progress(what string) {
	c.t.Helper()
	want := c.acked.Load() + churnStep
	wait.Within(c.t, c.cfg.Bound, fmt.Sprintf("%d more letters handled before stopping %s", churnStep, what), func() bool {
		return c.acked.Load() >= want
	}, c.missing)
}

// stop stops in and closes its backend, as a process that exits does.
// A cut stop first waits (within a second) for a slow letter in its
// handlers, then gives Stop a deadline that cuts the drain; it reports
// whether the drain was cut.
func (c *churn) stop(in *churnInstance, cut bool) bool {
	c.t.Helper()
	deadline := c.cfg.Bound
	if cut {
		end := time.Now().Add(time.Second)
		for in.slow.Load() == 0 && time.Now().Before(end) {
			time.Sleep(time.Millisecond) // a poll interval: waiting for a slow letter, not for a duration
		}
		deadline = churnSlowWork / 3
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.t.Context()), deadline)
	defer cancel()
	began := time.Now()
	var closing time.Time
	err := in.p.Stop(ctx)
	defer func() {
		c.t.Logf("instance %d stopped in %v, its backend closed in %v", in.id,
			closing.Sub(began).Round(time.Millisecond), time.Since(closing).Round(time.Millisecond))
	}()
	// A drain cut short closes the source with a context already
	// cancelled: the closing of its readers goes on in the background,
	// and the backend's Close waits for it.
	wasCut := errors.Is(err, pipeline.ErrShutdownTimeout) || errors.Is(err, context.Canceled)
	if err != nil && !(cut && wasCut) {
		c.t.Errorf("stopping instance %d: %v", in.id, err)
	}
	if cut {
		// Stop returns by its deadline; the pipeline's goroutines may
		// still be winding down.
		select {
		case <-in.p.Done():
		case <-time.After(c.cfg.Bound):
			c.t.Fatalf("instance %d still running %v after its stop", in.id, c.cfg.Bound)
		}
	}
	closing = time.Now()
	MustClose(c.t, fmt.Sprint("instance ", in.id, "'s backend"), in.be.Close)
	return wasCut
}

// missing describes what has not settled yet, for a wait that timed out.
func (c *churn) missing() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k := range churnKeys {
		for n := 1; n <= c.published[k]; n++ {
			m := Msg{Key: churnKey(k), N: n}
			if _, reject, _ := churnFate(k, n); !c.done[m] && (!reject || len(c.dead[m]) == 0) {
				out = append(out, m.String())
			}
		}
	}
	if len(out) > 40 {
		out = append(out[:40], "…")
	}
	return fmt.Sprintf("not settled: %s", strings.Join(out, " "))
}

// check checks what the handlers and the DLQ saw against what was
// published.
func (c *churn) check() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := slices.Clone(c.calls)
	slices.SortFunc(calls, func(a, b churnCall) int { return int(a.start - b.start) })
	byKey := map[string][]churnCall{}
	for _, call := range calls {
		byKey[call.Key] = append(byKey[call.Key], call)
	}
	repeats, late, deadCopies := 0, 0, 0
	for k := range churnKeys {
		key := churnKey(k)
		for n := 1; n <= c.published[k]; n++ {
			m := Msg{Key: key, N: n}
			_, reject, _ := churnFate(k, n)
			dead := c.dead[m]
			switch {
			case reject && c.done[m]:
				c.t.Errorf("%v handled successfully, but its handler rejects it", m)
			case reject && len(dead) == 0:
				c.t.Errorf("%v lost: its handler rejects it, and the DLQ never held it", m)
			case !reject && !c.done[m]:
				c.t.Errorf("%v lost: never handled successfully", m)
			case !reject && len(dead) > 0:
				c.t.Errorf("%v dead-lettered (%v), but its handler retries it at most twice", m, dead)
			}
			for _, r := range dead {
				if r != string(topology.ReasonRejected) {
					c.t.Errorf("%v dead-lettered with reason %s, want %s", m, r, topology.ReasonRejected)
				}
			}
			if len(dead) > 1 {
				deadCopies += len(dead) - 1
			}
		}
		r, l := c.checkKey(k, byKey[key])
		repeats += r
		late += l
	}
	c.t.Logf("%d letters handled successfully again, %d retried letters handled after a later letter of their key, %d extra copies in the DLQ",
		repeats, late, deadCopies)
}

// checkKey checks the calls of one key, in the order they began; it
// returns how many repeated a success and how many were late retries.
func (c *churn) checkKey(k int, calls []churnCall) (repeats, late int) {
	c.t.Helper()
	key := churnKey(k)
	first := map[int]churnCall{}   // the first success of each letter
	out := map[int][]churnCall{}   // the calls that sent each letter out
	running := map[int]churnCall{} // each instance's last call
	highest := 0
	for _, call := range calls {
		if prev, ok := running[call.inst]; ok && prev.end > call.start {
			c.t.Errorf("key %s: instance %d handled %v while %v was not done: two letters of a key at once", key, call.inst, call, prev)
		}
		running[call.inst] = call
		switch call.outcome {
		case churnRetried, churnInterrupted:
			out[call.N] = append(out[call.N], call)
			continue
		case churnRejected:
			continue
		}
		if f, ok := first[call.N]; ok {
			repeats++
			if f.end > call.start {
				c.t.Errorf("key %s: %v handled successfully again while its earlier success %v was not done", key, call, f)
			}
			continue
		}
		if call.N < highest {
			late++
			if call.retries == 0 {
				c.t.Errorf("key %s: %v, never retried, handled after letter %d of its key: out of order\n%s",
					key, call, highest, churnHistory(calls))
			}
			for m := call.N + 1; m <= highest; m++ {
				cm, ok := first[m]
				if !ok {
					continue
				}
				var sent *churnCall // the last call that sent it out before cm
				for i := range out[call.N] {
					if out[call.N][i].start < cm.start {
						sent = &out[call.N][i]
					}
				}
				if sent != nil && sent.inst == cm.inst && !c.movedAway(cm.inst, k, *sent, cm.start) {
					c.t.Errorf("key %s: instance %d handled %v while %v, which it had sent out (%s), had not come back: out of order\n%s",
						key, cm.inst, cm, call.Msg, sent.outcome, churnHistory(calls))
				}
			}
		} else {
			highest = call.N
		}
		first[call.N] = call
	}
	return repeats, late
}

// churnHistory prints a key's calls for a failure.
func churnHistory(calls []churnCall) string {
	var b strings.Builder
	for _, call := range calls {
		fmt.Fprintf(&b, "  %v\n", call)
	}
	return b.String()
}
