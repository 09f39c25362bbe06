package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/testsize"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/telemetry"
)

// exitAct is what user code does with a message (or with the chunk or batch
// it decides for): return normally, return an error, panic, or end its
// goroutine with runtime.Goexit.
type exitAct uint8

const (
	actOK exitAct = iota
	actErr
	actPanic
	actExit
)

// exitPlan is what each piece of user code does for one message: the
// processor's handler, the batcher's PartitionBy and its Weight for it;
// Prepare, the batch handler and the HandleFailed hooks for the chunk,
// batch or failed slice whose first message with something other than
// actOK it is.
type exitPlan struct {
	handle, prepare, batch, procFailed, batchFailed exitAct
	// partBy and weigh are what the batcher's PartitionBy and Weight do
	// for the message: return, panic or exit (never actErr, they return
	// no error); weight is the weight Weight returns.
	partBy, weigh exitAct
	weight        int
	// itemFail makes the batch handler fail the message alone (m.Fail).
	itemFail bool
	// sleep is how long (fake time) the handler takes; batchSleep how
	// long the batch handler takes, at least, for a batch holding it.
	sleep, batchSleep time.Duration
}

// exitPanic is the value user code panics with: the site and the message
// that decided it.
type exitPanic struct {
	site string
	id   uint64
}

// exitSiteError is the error user code returns: the site and the message
// that decided it.
type exitSiteError struct {
	site string
	id   uint64
}

func (e *exitSiteError) Error() string { return fmt.Sprintf("%s failed for %d", e.site, e.id) }

// errFailedReplaced wraps the error the processors' HandleFailed replaced
// with m.Fail.
var errFailedReplaced = errors.New("replaced by HandleFailed")

// exitWorld records what user code saw and did, to judge each outcome by.
type exitWorld struct {
	plans []exitPlan

	mu         sync.Mutex
	chunkOf    map[uint64]int  // message → the last chunk Prepare saw it in
	exitChunk  map[int]bool    // chunks whose processor exited
	batchOf    map[uint64]int  // message → the batch the batch handler saw it in
	exitBatch  map[int]bool    // batches whose batch handler exited
	handled    map[uint64]bool // messages the handler returned without error for
	batchedOK  map[uint64]bool // messages of batches the batch handler returned nil for
	called     map[uint64]bool // messages the handler was called with
	lastCalled map[int]uint64  // feed → 1 + the last message of it the handler was called with
	chunks     int
	batches    int
	delivered  map[uint64]bool
	// keyCalled and keyed are the messages the batcher's PartitionBy was
	// called with and returned for; handOnExit the chunks whose processor
	// a batcher's PartitionBy ended while it handed them on; weighCalled
	// the messages Weight was called with.
	keyCalled   map[uint64]bool
	keyed       map[uint64]bool
	handOnExit  map[int]bool
	weighCalled map[uint64]bool
	// goChunk is the chunk Prepare last saw on each goroutine (0 from the
	// ChunkStart hook on, until Prepare sees the next one), to tell which
	// chunk a processor's telemetry hook observed.
	goChunk map[uint64]int
	// startExited and batchStartExited add up the sizes of the chunks
	// whose ChunkStart hook exited and of the batches whose BatchStart
	// hook exited: their messages fail with message.ErrHandlerExited
	// before Prepare, or the batch handler, sees them. unprepared and
	// unbatched count the messages failed so: never seen by Prepare, or
	// handled but never seen by a batch handler.
	startExited, batchStartExited int
	unprepared, unbatched         int
}

// act is what pick says for the first message of msgs (whose ids idOf
// reads) with something other than actOK, and that message's id.
func act[T any](w *exitWorld, msgs []*message.Message[T], idOf func(T) uint64, pick func(exitPlan) exitAct) (exitAct, uint64) {
	for _, m := range msgs {
		id := idOf(m.Data)
		if a := pick(w.plans[id]); a != actOK {
			return a, id
		}
	}
	return actOK, 0
}

func sameID(id uint64) uint64 { return id }

// exitPayload is the processors' output in the seeds whose processors
// change the payload's type (so that they convert messages).
type exitPayload struct{ id uint64 }

// doAct carries out a for the user code at site, decided by message id.
func doAct(site string, a exitAct, id uint64) error {
	switch a {
	case actErr:
		return &exitSiteError{site: site, id: id}
	case actPanic:
		panic(exitPanic{site: site, id: id})
	case actExit:
		runtime.Goexit()
	}
	return nil
}

// exitSource delivers feeds × perFeed messages, ids feed*perFeed+seq, in
// order per feed; ordered, it asks for per-partition order with one
// partition key per feed.
type exitSource struct {
	producer.Basic
	feeds, perFeed int
	ordered        bool
	ack            acker.Acknowledger
	w              *exitWorld
}

func (s *exitSource) Info() (producer.Info, error) { return producer.Info{Ordered: s.ordered}, nil }

func (s *exitSource) Run(ctx context.Context, st *producer.Stage[uint64]) error {
	var wg sync.WaitGroup
	for f := range s.feeds {
		key := "p" + strconv.Itoa(f)
		feed := st.NewFeed(key, nil)
		wg.Go(func() {
			for seq := 0; seq < s.perFeed; {
				k, err := feed.Acquire(ctx, s.perFeed-seq)
				if err != nil {
					return
				}
				msgs := make([]*message.Message[uint64], k)
				first := uint64(f*s.perFeed + seq)
				for i := range msgs {
					id := first + uint64(i)
					msgs[i] = message.New(id, s.ack, id)
					if s.ordered {
						msgs[i].SetPartitionKey(key)
					}
				}
				if !feed.TryDeliver(msgs...) {
					return
				}
				s.w.mu.Lock()
				// The messages are the pipeline's now: their ids, not
				// their fields.
				for id := range uint64(k) {
					s.w.delivered[first+id] = true
				}
				s.w.mu.Unlock()
				seq += k
			}
		})
	}
	wg.Wait()
	return nil
}

// exitSoakCase is one random pipeline of
// TestEveryDeliveredMessageGetsOneExplainedOutcomeWhateverUserCodeDoes.
type exitSoakCase struct {
	feeds, perFeed                  int
	ordered, procPartition          bool
	convert                         bool // the processors change the payload's type
	concurrency, maxDemand          int
	batchers, batchSize, batchConc  int
	batchPartition                  bool
	batchTimeout                    time.Duration
	stop                            string // "exhausted", "stop", "deadline"
	stopAfter, deadline, shutdownTO time.Duration
	// maxWeight, when not 0, gives the batchers a Weight (exitPlan.weigh,
	// exitPlan.weight) and this MaxWeight.
	maxWeight int
	// emit is what the BatchEmit telemetry hook does at its nth call,
	// emit[n%len(emit)]; nil leaves it unset.
	emit []exitAct
	// hooks is what each of the other telemetry hooks (exitHookNames)
	// does at its nth call, hooks[name][n%len]; a hook not in it is
	// unset. Without emit and hooks the pipeline has no hooks.
	hooks map[string][]exitAct
}

// exitHookNames are the telemetry hooks beside BatchEmit that
// TestEveryDeliveredMessageGetsOneExplainedOutcomeWhateverUserCodeDoes
// sets, in the order their plans are drawn. PipelineStart runs on the
// goroutine that called Start, PipelineStop on the pipeline's own.
var exitHookNames = []string{"ChunkStart", "ChunkStop", "MessageStart", "MessageStop", "MessageException",
	"HandleFailed", "BatchStart", "BatchStop", "PipelineStart", "PipelineStop"}

func newExitSoakCase(rng *rand.Rand) (exitSoakCase, []exitPlan) {
	c := exitSoakCase{
		feeds:          1 + rng.IntN(3),
		perFeed:        rng.IntN(120),
		ordered:        rng.IntN(3) == 0,
		procPartition:  rng.IntN(4) == 0,
		convert:        rng.IntN(2) == 0,
		concurrency:    1 + rng.IntN(4),
		maxDemand:      1 + rng.IntN(12),
		batchers:       1 + rng.IntN(2),
		batchSize:      1 + rng.IntN(20),
		batchConc:      1 + rng.IntN(4),
		batchPartition: rng.IntN(3) == 0,
		batchTimeout:   time.Duration(1+rng.IntN(5)) * time.Millisecond,
		stop:           []string{"exhausted", "stop", "deadline"}[rng.IntN(3)],
		stopAfter:      time.Duration(rng.IntN(40)) * time.Millisecond,
		deadline:       time.Duration(rng.IntN(8)) * time.Millisecond,
		shutdownTO:     time.Minute,
	}
	if rng.IntN(4) == 0 {
		c.shutdownTO = time.Duration(1+rng.IntN(5)) * time.Millisecond
	}
	// How often each piece of user code misbehaves, this seed.
	rate := func() float64 { return []float64{0, 0.01, 0.05, 0.15, 0.5}[rng.IntN(5)] }
	rh, rp, rb, rpf, rbf := rate(), rate(), rate(), rate(), rate()
	act := func(r float64) exitAct {
		if rng.Float64() >= r {
			return actOK
		}
		return exitAct(1 + rng.IntN(3))
	}
	plans := make([]exitPlan, c.feeds*c.perFeed)
	for i := range plans {
		plans[i] = exitPlan{handle: act(rh), prepare: act(rp), batch: act(rb), procFailed: act(rpf), batchFailed: act(rbf)}
		plans[i].itemFail = rng.Float64() < rb
		if rng.IntN(8) == 0 {
			plans[i].sleep = time.Duration(rng.IntN(3000)) * time.Microsecond
		}
		if rng.IntN(8) == 0 {
			plans[i].batchSleep = time.Duration(rng.IntN(3000)) * time.Microsecond
		}
	}
	// Drawn after the rest, so that the rest is what it was before these
	// were planned.
	rk, rw := rate(), rate()
	exitOnly := func(r float64) exitAct {
		if rng.Float64() >= r {
			return actOK
		}
		return []exitAct{actPanic, actExit}[rng.IntN(2)]
	}
	if rng.IntN(2) == 0 {
		c.maxWeight = 1 + rng.IntN(20)
	}
	for i := range plans {
		plans[i].partBy, plans[i].weigh = exitOnly(rk), exitOnly(rw)
		// From -1 (counted as 0) to past MaxWeight (a batch of its own).
		plans[i].weight = rng.IntN(c.maxWeight+3) - 1
	}
	if rng.IntN(2) == 0 {
		re := rate()
		c.emit = make([]exitAct, 1+rng.IntN(64))
		for i := range c.emit {
			c.emit[i] = exitOnly(re)
		}
	}
	// Drawn after the rest too, for the same reason; in half the seeds,
	// so that a quarter of them still run without hooks.
	if rng.IntN(2) == 0 {
		c.hooks = map[string][]exitAct{}
		for _, name := range exitHookNames {
			if rng.IntN(2) != 0 {
				continue
			}
			re := rate()
			acts := make([]exitAct, 1+rng.IntN(64))
			for i := range acts {
				acts[i] = exitOnly(re)
			}
			c.hooks[name] = acts
		}
	}
	return c, plans
}

// Guarantee: whatever user code does with a message — return, fail it,
// panic or end its goroutine (runtime.Goexit) — in the processors'
// handler, Prepare or HandleFailed, in a batcher's PartitionBy or Weight,
// in a batch handler or its HandleFailed, or in any of the pipeline's
// telemetry hooks, with any concurrency, demand, batching, ordering and
// stopping point: every message the source delivered gets at most one
// outcome, exactly one unless a drain was cut short; a failed message
// carries an error its user code explains (its own error, a
// *message.PanicError naming it or its chunk or batch,
// message.ErrHandlerExited when a goroutine that held it exited — its
// processor, its batch processor, the processor handing it on when a
// batcher's PartitionBy exited (a message handed on before then may still
// succeed), the batcher partition when its own Weight exited — or the
// shutdown's interruption, or an exit in a telemetry hook: ChunkStart
// (the messages Prepare never saw, no more than those chunks held), a
// message hook or the processors' HandleFailed hook (its chunk),
// BatchStart (handled messages no batch handler saw, no more than those
// batches held); a panic in any hook fails nothing, nor does an exit in
// BatchEmit, ChunkStop, BatchStop, the batchers' HandleFailed hook,
// PipelineStart or PipelineStop, after which the pipeline starts and
// stops all the same); a successful one went through the handler, its batcher's
// PartitionBy and Weight returned for it, and a batch handler; the stats
// add up (In = Succeeded + Failed + Unhandled for the processors, plus
// Dropped + InFlight for the batchers, and every missing outcome is
// counted unhandled); an ordered source's partitions are handled in
// order; Stop returns, by its deadline when it has one; and no goroutine
// is left. It runs 150 seeds (20 under -short), each a random
// pipeline in a synctest bubble; BOULEVARD_EXIT_SOAK_SEEDS=N runs N.
func TestEveryDeliveredMessageGetsOneExplainedOutcomeWhateverUserCodeDoes(t *testing.T) {
	n := testsize.Count(t, "BOULEVARD_EXIT_SOAK_SEEDS", 20, 150)
	testsize.Seeds(t, n, func(t *testing.T, _ uint64, rng *rand.Rand) {
		c, plans := newExitSoakCase(rng)
		t.Logf("%+v", c)
		if c.convert {
			exitSoakOnce(t, c, plans, func(id uint64) exitPayload { return exitPayload{id} }, func(p exitPayload) uint64 { return p.id })
			return
		}
		exitSoakOnce(t, c, plans, sameID, sameID)
	})
}

// exitSoakOnce runs one pipeline of
// TestEveryDeliveredMessageGetsOneExplainedOutcomeWhateverUserCodeDoes,
// whose processors turn the source's message ids into Out with wrap (read
// back with idOf).
func exitSoakOnce[Out any](t *testing.T, c exitSoakCase, plans []exitPlan, wrap func(uint64) Out, idOf func(Out) uint64) {
	w := &exitWorld{plans: plans, chunkOf: map[uint64]int{}, exitChunk: map[int]bool{},
		batchOf: map[uint64]int{}, exitBatch: map[int]bool{}, handled: map[uint64]bool{},
		batchedOK: map[uint64]bool{}, called: map[uint64]bool{}, lastCalled: map[int]uint64{}, delivered: map[uint64]bool{},
		keyCalled: map[uint64]bool{}, keyed: map[uint64]bool{}, handOnExit: map[int]bool{}, weighCalled: map[uint64]bool{},
		goChunk: map[uint64]int{}}
	rec := acker.NewRecorder(false)
	src := &exitSource{feeds: c.feeds, perFeed: c.perFeed, ordered: c.ordered, ack: rec, w: w}
	o := pipeline.Options[uint64, Out]{
		Name:            "exitsoak",
		Logger:          slog.New(slog.DiscardHandler),
		ShutdownTimeout: c.shutdownTO,
		Producer:        producer.Options[uint64]{Source: src},
		Processors: processor.Options[uint64, Out]{
			Concurrency: c.concurrency,
			MaxDemand:   c.maxDemand,
			Prepare: func(_ context.Context, msgs []*message.Message[uint64]) error {
				a, id := act(w, msgs, sameID, func(p exitPlan) exitAct { return p.prepare })
				w.mu.Lock()
				w.chunks++
				for _, m := range msgs {
					w.chunkOf[m.Data] = w.chunks
				}
				w.goChunk[goroutineID()] = w.chunks
				if a == actExit {
					w.exitChunk[w.chunks] = true
				}
				w.mu.Unlock()
				return doAct("prepare", a, id)
			},
			Handle: func(ctx context.Context, m *message.Message[uint64]) (Out, error) {
				p := plans[m.Data]
				w.mu.Lock()
				w.called[m.Data] = true
				if c.ordered && !c.procPartition && c.perFeed > 0 {
					f := int(m.Data) / c.perFeed
					if m.Data+1 <= w.lastCalled[f] {
						t.Errorf("ordered source: message %d handled after message %d of its partition", m.Data, w.lastCalled[f]-1)
					}
					w.lastCalled[f] = m.Data + 1
				}
				if p.handle == actExit {
					w.exitChunk[w.chunkOf[m.Data]] = true
				}
				w.mu.Unlock()
				if p.sleep > 0 {
					select {
					case <-time.After(p.sleep):
					case <-ctx.Done():
						return wrap(0), ctx.Err()
					}
				}
				if err := doAct("handle", p.handle, m.Data); err != nil {
					return wrap(0), err
				}
				m.SetBatchKey(strconv.FormatUint(m.Data%3, 10))
				if c.batchers == 2 && m.Data%2 == 1 {
					m.SetBatcher("second")
				}
				w.mu.Lock()
				w.handled[m.Data] = true
				w.mu.Unlock()
				return wrap(m.Data), nil
			},
			HandleFailed: func(_ context.Context, failed []*message.Message[uint64]) {
				a, id := act(w, failed, sameID, func(p exitPlan) exitAct { return p.procFailed })
				if a == actExit {
					w.mu.Lock()
					// HandleFailed also sees a chunk whose ChunkStart hook
					// exited, which Prepare never saw: its messages are
					// counted with startExited already.
					if c := w.goChunk[goroutineID()]; c != 0 {
						w.exitChunk[c] = true
					}
					w.mu.Unlock()
				}
				if a == actErr {
					for _, m := range failed {
						m.Fail(fmt.Errorf("%w: %w", errFailedReplaced, m.Err()))
					}
				}
				doAct("HandleFailed", a, id) //nolint:errcheck // only panics and exits matter here
			},
		},
	}
	if c.procPartition {
		o.Processors.PartitionBy = func(m *message.Message[uint64]) string { return strconv.FormatUint(m.Data%5, 10) }
	}
	batchHandle := func(ctx context.Context, b []*message.Message[Out], _ message.BatchInfo) error {
		a, id := act(w, b, idOf, func(p exitPlan) exitAct { return p.batch })
		var sleep time.Duration
		for _, m := range b {
			sleep = max(sleep, plans[idOf(m.Data)].batchSleep)
		}
		if sleep > 0 {
			select {
			case <-time.After(sleep):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		w.mu.Lock()
		w.batches++
		for _, m := range b {
			w.batchOf[idOf(m.Data)] = w.batches
		}
		if a == actExit {
			w.exitBatch[w.batches] = true
		}
		for _, m := range b {
			if plans[idOf(m.Data)].itemFail {
				m.Fail(&exitSiteError{site: "batch item", id: idOf(m.Data)})
			} else if a == actOK {
				w.batchedOK[idOf(m.Data)] = true
			}
		}
		w.mu.Unlock()
		return doAct("batch", a, id)
	}
	batchFailed := func(_ context.Context, failed []*message.Message[Out], _ message.BatchInfo) {
		a, id := act(w, failed, idOf, func(p exitPlan) exitAct { return p.batchFailed })
		if a == actErr {
			for _, m := range failed {
				m.SetDisposition(acker.DispositionDiscard)
			}
		}
		doAct("batch HandleFailed", a, id) //nolint:errcheck // only panics and exits matter here
	}
	partBy := func(m *message.Message[Out]) string {
		id := idOf(m.Data)
		a := plans[id].partBy
		w.mu.Lock()
		w.keyCalled[id] = true
		if a == actExit {
			w.handOnExit[w.chunkOf[id]] = true
		}
		w.mu.Unlock()
		doAct("batch PartitionBy", a, id) //nolint:errcheck // it returns no error
		w.mu.Lock()
		w.keyed[id] = true
		w.mu.Unlock()
		return m.BatchKey()
	}
	weigh := func(m *message.Message[Out]) int {
		id := idOf(m.Data)
		a := plans[id].weigh
		w.mu.Lock()
		w.weighCalled[id] = true
		w.mu.Unlock()
		doAct("weight", a, id) //nolint:errcheck // it returns no error
		return plans[id].weight
	}
	for i, name := range []string{message.DefaultBatcher, "second"}[:c.batchers] {
		bo := batcher.Options[Out]{Name: name, BatchSize: c.batchSize, BatchTimeout: c.batchTimeout,
			Concurrency: c.batchConc, Handle: batchHandle, HandleFailed: batchFailed}
		if c.batchPartition && i == 0 {
			bo.PartitionBy = partBy
		}
		if c.maxWeight > 0 {
			bo.Weight, bo.MaxWeight = weigh, c.maxWeight
		}
		o.Batchers = append(o.Batchers, bo)
	}
	if c.emit != nil || len(c.hooks) > 0 {
		o.Telemetry = exitSoakHooks(c, w, o.Name+".processor")
	}
	p := mustNew(t, o)
	// On a goroutine of its own, which the PipelineStart hook may end:
	// the pipeline runs all the same.
	startReturned := false
	var startErr error
	startDone := make(chan struct{})
	go func() {
		defer close(startDone)
		startErr = p.Start(context.Background())
		startReturned = true
	}()
	<-startDone
	if startErr != nil {
		t.Fatal(startErr)
	}
	if !startReturned && c.hooks["PipelineStart"] == nil {
		t.Fatal("Start ended its goroutine without a PipelineStart hook to end it")
	}

	var stopErr error
	cut := c.shutdownTO < time.Minute
	switch c.stop {
	case "exhausted":
		<-p.Done()
		stopErr = p.Stop(context.Background())
	case "stop":
		time.Sleep(c.stopAfter)
		stopErr = p.Stop(context.Background())
	case "deadline":
		time.Sleep(c.stopAfter)
		ctx, cancel := context.WithTimeout(context.Background(), c.deadline)
		start := time.Now()
		stopErr = p.Stop(ctx)
		if took := time.Since(start); took > c.deadline {
			t.Errorf("Stop with a deadline %v away returned after %v", c.deadline, took)
		}
		cancel()
		cut = true
	}
	if stopErr != nil && !(cut && errors.Is(stopErr, pipeline.ErrShutdownTimeout)) {
		t.Errorf("Stop = %v", stopErr)
	}
	<-p.Done()

	w.mu.Lock()
	defer w.mu.Unlock()
	// A broken guarantee tends to break for many messages: the first few
	// say enough.
	reported := 0
	errorf := func(format string, args ...any) {
		t.Helper()
		if reported++; reported <= 10 {
			t.Errorf(format, args...)
		} else if reported == 11 {
			t.Error("more messages break the guarantees; not reported")
		}
	}
	outcomes := rec.Counts()
	for id, k := range outcomes {
		if k != 1 {
			errorf("message %d acknowledged %d times", id, k)
		}
		if !w.delivered[id] {
			errorf("message %d acknowledged without being delivered", id)
		}
	}
	missing := 0
	for id := range w.delivered {
		if outcomes[id] == 0 {
			missing++
			if stopErr == nil {
				errorf("message %d delivered, but got no outcome from a drain that finished", id)
			}
		}
	}
	for _, out := range rec.Successful() {
		id := out.ID
		switch {
		case !w.handled[id]:
			errorf("message %d succeeded without its handler returning", id)
		case !w.batchedOK[id]:
			errorf("message %d succeeded without a batch handler returning nil for it", id)
		case w.exitChunk[w.chunkOf[id]]:
			errorf("message %d succeeded though its processor exited holding it", id)
		case w.exitBatch[w.batchOf[id]]:
			errorf("message %d succeeded though its batch processor exited holding it", id)
		case w.handOnExit[w.chunkOf[id]] && !w.keyed[id]:
			errorf("message %d succeeded though a batcher's PartitionBy ended its processor before handing it on", id)
		case w.keyCalled[id] && plans[id].partBy != actOK:
			errorf("message %d succeeded though its batcher's PartitionBy did not return for it (%d)", id, plans[id].partBy)
		case w.weighCalled[id] && plans[id].weigh != actOK:
			errorf("message %d succeeded though its Weight did not return for it (%d)", id, plans[id].weigh)
		}
	}
	failed := map[uint64]bool{}
	for _, out := range rec.Failed() {
		failed[out.ID] = true
		if why := w.unexplained(out.ID, out.Err, cut); why != "" {
			errorf("message %d failed with %v: %s", out.ID, out.Err, why)
		}
	}
	for id := range w.called {
		if a := plans[id].handle; (a == actErr || a == actPanic) && outcomes[id] == 1 && !failed[id] {
			errorf("message %d succeeded though its handler failed it (%d)", id, a)
		}
	}

	st := p.Stats()
	ps := st.Processors
	if ps.In != ps.Succeeded+ps.Failed.Total()+ps.Unhandled {
		t.Errorf("processors: In %d != Succeeded %d + Failed %d + Unhandled %d", ps.In, ps.Succeeded, ps.Failed.Total(), ps.Unhandled)
	}
	unhandled := ps.Unhandled
	acked := ps.Failed.Total()
	for _, b := range st.Batchers {
		if b.In != b.Succeeded+b.Failed.Total()+b.Unhandled+b.Dropped+uint64(b.InFlight) {
			t.Errorf("batcher %s: In %d != Succeeded %d + Failed %d + Unhandled %d + Dropped %d + InFlight %d",
				b.Name, b.In, b.Succeeded, b.Failed.Total(), b.Unhandled, b.Dropped, b.InFlight)
		}
		if b.InFlight != 0 {
			t.Errorf("batcher %s: %d messages in flight once stopped", b.Name, b.InFlight)
		}
		unhandled += b.Unhandled
		acked += b.Succeeded + b.Failed.Total()
	}
	for _, pr := range st.Producers {
		unhandled += pr.Unhandled
	}
	if int(acked) != rec.Total() {
		t.Errorf("stats count %d outcomes, the acknowledger got %d", acked, rec.Total())
	}
	if w.unprepared > w.startExited || (stopErr == nil && w.unprepared != w.startExited) {
		t.Errorf("%d messages Prepare never saw failed with message.ErrHandlerExited; the chunks whose ChunkStart hook exited held %d",
			w.unprepared, w.startExited)
	}
	if w.unbatched > w.batchStartExited {
		t.Errorf("%d handled messages no batch handler saw failed with message.ErrHandlerExited; the batches whose BatchStart hook exited held %d",
			w.unbatched, w.batchStartExited)
	}
	if int(unhandled) != missing {
		t.Errorf("stats count %d unhandled messages, %d delivered messages got no outcome", unhandled, missing)
	}
	if t.Failed() {
		t.Logf("delivered %d, outcomes %d, stats %+v %+v", len(w.delivered), rec.Total(), ps, st.Batchers)
	}
}

// unexplained returns why err, the error message id failed with, is not
// one its user code explains ("" when it is). w.mu is held.
func (w *exitWorld) unexplained(id uint64, err error, cut bool) string {
	if errors.Is(err, acker.ErrShutdown) && !cut {
		return "interrupted by a drain that was not cut short"
	}
	for errors.Is(err, errFailedReplaced) {
		// HandleFailed's replacement: judge what it wrapped.
		if u, ok := err.(interface{ Unwrap() []error }); ok {
			err = u.Unwrap()[1]
		} else if u, ok := err.(interface{ Unwrap() error }); ok {
			err = u.Unwrap()
		} else {
			break
		}
	}
	if cut && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ""
	}
	if errors.Is(err, message.ErrHandlerExited) {
		if w.exitChunk[w.chunkOf[id]] || w.exitBatch[w.batchOf[id]] || w.handOnExit[w.chunkOf[id]] ||
			(w.weighCalled[id] && w.plans[id].weigh == actExit) {
			return ""
		}
		// A ChunkStart hook exited before Prepare saw it, or a BatchStart
		// hook before a batch handler did: counted, and matched against
		// the sizes of those chunks and batches once all are judged.
		if _, prepared := w.chunkOf[id]; !prepared && w.startExited > 0 {
			w.unprepared++
			return ""
		}
		if _, batched := w.batchOf[id]; !batched && w.handled[id] && w.batchStartExited > 0 {
			w.unbatched++
			return ""
		}
		return "no goroutine holding it exited"
	}
	var pe *message.PanicError
	if errors.As(err, &pe) {
		v, ok := pe.Value.(exitPanic)
		if !ok {
			return "panic value not the user's"
		}
		return w.sameUnit(id, v.site, v.id, actPanic)
	}
	var se *exitSiteError
	if errors.As(err, &se) {
		return w.sameUnit(id, se.site, se.id, actErr)
	}
	return "no user code failed it"
}

// sameUnit reports ("" when it is so) whether the user code at site,
// deciding for message by, could fail message id doing a: by itself for
// the handler, a batcher's PartitionBy and Weight, the same chunk for
// Prepare, the same batch for a batch handler.
func (w *exitWorld) sameUnit(id uint64, site string, by uint64, a exitAct) string {
	p := w.plans[by]
	planned := map[string]exitAct{"handle": p.handle, "prepare": p.prepare, "batch": p.batch, "batch item": actErr,
		"batch PartitionBy": p.partBy, "weight": p.weigh}[site]
	if site == "batch item" && !p.itemFail {
		planned = actOK
	}
	if planned != a {
		return fmt.Sprintf("%s of message %d was not to do that (%d)", site, by, planned)
	}
	switch site {
	case "handle", "batch item", "batch PartitionBy", "weight":
		if by == id {
			return ""
		}
	case "prepare":
		if w.chunkOf[id] == w.chunkOf[by] {
			return ""
		}
	case "batch":
		if w.batchOf[id] == w.batchOf[by] {
			return ""
		}
	}
	return fmt.Sprintf("%s of message %d could not fail it", site, by)
}

// exitSoakHooks returns the telemetry hooks of c, which record in w what
// their exits do to the messages: an exit in ChunkStart fails the chunk
// before Prepare sees it; in MessageStart, MessageStop, MessageException
// or the processors' HandleFailed hook (whose stage is procStage) it fails
// the chunk Prepare last saw on the goroutine as the handler's exit does;
// in BatchStart it fails the batch before its handler sees it; in
// ChunkStop, BatchStop, the batchers' HandleFailed hook (run once the
// outcomes are decided), BatchEmit, PipelineStart and PipelineStop it
// changes no outcome. A panic in any of them changes no outcome.
func exitSoakHooks(c exitSoakCase, w *exitWorld, procStage string) *telemetry.Hooks {
	h := &telemetry.Hooks{}
	if c.emit != nil {
		var emits atomic.Uint64
		h.BatchEmit = func(context.Context, telemetry.Batch) {
			n := emits.Add(1) - 1
			doAct("BatchEmit", c.emit[n%uint64(len(c.emit))], n) //nolint:errcheck // it returns no error
		}
	}
	calls := map[string]*atomic.Uint64{}
	for name := range c.hooks {
		calls[name] = new(atomic.Uint64)
	}
	// next is what hook name does at this call, and the call's number.
	next := func(name string) (exitAct, uint64) {
		acts := c.hooks[name]
		n := calls[name].Add(1) - 1
		return acts[n%uint64(len(acts))], n
	}
	// chunkHook fails, when it exits, the chunk Prepare last saw on the
	// calling goroutine.
	// The processors' HandleFailed hook also observes a chunk whose
	// ChunkStart hook exited (0: Prepare never saw it), whose messages are
	// counted with startExited already.
	chunkHook := func(name string) {
		a, n := next(name)
		if a == actExit {
			w.mu.Lock()
			if c := w.goChunk[goroutineID()]; c != 0 {
				w.exitChunk[c] = true
			}
			w.mu.Unlock()
		}
		doAct(name, a, n) //nolint:errcheck // it returns no error
	}
	// noEffect is a hook whose exit changes no outcome.
	noEffect := func(name string) {
		a, n := next(name)
		doAct(name, a, n) //nolint:errcheck // it returns no error
	}
	for name := range c.hooks {
		switch name {
		case "ChunkStart":
			h.ChunkStart = func(_ context.Context, e telemetry.Chunk) {
				a, n := next(name)
				w.mu.Lock()
				w.goChunk[goroutineID()] = 0
				if a == actExit {
					w.startExited += e.Size
				}
				w.mu.Unlock()
				doAct(name, a, n) //nolint:errcheck // it returns no error
			}
		case "ChunkStop":
			h.ChunkStop = func(context.Context, telemetry.Chunk) { noEffect(name) }
		case "MessageStart":
			h.MessageStart = func(context.Context, telemetry.Message) { chunkHook(name) }
		case "MessageStop":
			h.MessageStop = func(context.Context, telemetry.Message) { chunkHook(name) }
		case "MessageException":
			h.MessageException = func(context.Context, telemetry.Message) { chunkHook(name) }
		case "HandleFailed":
			h.HandleFailed = func(_ context.Context, e telemetry.Failed) {
				if e.Stage == procStage {
					chunkHook(name)
					return
				}
				noEffect(name)
			}
		case "BatchStart":
			h.BatchStart = func(_ context.Context, e telemetry.Batch) {
				a, n := next(name)
				if a == actExit {
					w.mu.Lock()
					w.batchStartExited += e.Info.Size
					w.mu.Unlock()
				}
				doAct(name, a, n) //nolint:errcheck // it returns no error
			}
		case "BatchStop":
			h.BatchStop = func(context.Context, telemetry.Batch) { noEffect(name) }
		case "PipelineStart":
			h.PipelineStart = func(context.Context, telemetry.Pipeline) { noEffect(name) }
		case "PipelineStop":
			h.PipelineStop = func(context.Context, telemetry.Pipeline) { noEffect(name) }
		}
	}
	return h
}

// goroutineID is the calling goroutine's id, read from its stack header
// ("goroutine N [...").
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = b[len("goroutine "):]
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
