package topology_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testsize"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// seqSoakConfig is one random sequenced topology, its traffic and its
// consumer.
type seqSoakConfig struct {
	keys, messages int
	capacity       int // of the in-memory queues
	shards         int // routing shards
	holds          []time.Duration
	policy         topology.SequenceFailure
	maxHeldBack    int
	maxBatch       int
	maxRetries     int
	processors     int
	producers      int  // producer stages (a sequenced source reads with one)
	unkeyed        bool // some messages have the empty key, never held back
	flow           producer.Flow
	bursts         int // the messages are published in this many bursts
	// stops are the handler calls (counted from 1) at which the pipeline
	// is stopped, with messages in flight, and a new source and pipeline
	// take over.
	stops []int
	// per attempt, out of 100: below success the handler succeeds, then
	// up to retry it fails (retryable), up to deferred it defers, up to
	// reject it rejects, up to 100 it panics.
	success, retry, deferred, reject int
}

func newSeqSoakConfig(rng *rand.Rand) seqSoakConfig {
	c := seqSoakConfig{
		keys:        1 + rng.IntN(4),
		messages:    20 + rng.IntN(100),
		capacity:    topology.DefaultMemoryCapacity,
		shards:      1 + rng.IntN(4),
		holds:       []time.Duration{time.Second},
		policy:      topology.Skip,
		maxHeldBack: 1 + rng.IntN(8),
		maxBatch:    1 + rng.IntN(8),
		maxRetries:  1 + rng.IntN(4),
		processors:  1 + rng.IntN(3),
		producers:   1 + rng.IntN(2),
		unkeyed:     rng.IntN(4) == 0,
		bursts:      1 + rng.IntN(4),
	}
	if rng.IntN(2) == 0 {
		c.holds = append(c.holds, 5*time.Second)
	}
	if rng.IntN(2) == 0 {
		c.policy = topology.FailAll
	}
	if rng.IntN(8) == 0 {
		c.maxRetries = -1 // a retry is dead-lettered at once
	}
	if rng.IntN(3) == 0 {
		// Publishes wait for room; hold releases and retries go over
		// it. A dead-lettering never waits: past twice the capacity it
		// is refused (ErrFull, and the source keeps the letter and
		// stops taking more) when the DLQ's consumer lags, which is no
		// matter for this test; so the DLQ and the letters waiting for
		// room in it can take every message.
		c.capacity = (c.messages+1)/2 + rng.IntN(8)
	}
	if rng.IntN(3) == 0 {
		c.flow.Initial = 2 + rng.IntN(8)
		c.flow.Threshold = 1 + rng.IntN(c.flow.Initial-1)
		c.flow.Refill = 1 + rng.IntN(8)
	}
	for range rng.IntN(4) - 1 {
		c.stops = append(c.stops, 1+rng.IntN(c.messages))
	}
	slices.Sort(c.stops)
	c.success = 55 + rng.IntN(30)
	c.retry = c.success + 5 + rng.IntN(15)
	c.deferred = c.retry + rng.IntN(4)
	c.reject = c.deferred + 1 + rng.IntN(6)
	return c
}

// attemptOutcome is what the soak's handler does with one attempt.
type attemptOutcome uint8

const (
	attemptSucceeds attemptOutcome = iota
	attemptRetries
	attemptDefers
	attemptRejects
	attemptPanics
)

// outcome returns what the handler does with attempt n (from 1) of
// message v, and how long (fake time) it takes first: drawn from the
// seed, v and n only, so that a seed replays the same outcomes whatever
// the scheduling.
func (c seqSoakConfig) outcome(seed uint64, v, n int) (attemptOutcome, time.Duration) {
	r := rand.New(rand.NewPCG(seed, uint64(v)<<16|uint64(n)))
	var d time.Duration
	if r.IntN(4) == 0 {
		d = time.Duration(1+r.IntN(20)) * time.Millisecond
	}
	switch x := r.IntN(100); {
	case x < c.success:
		return attemptSucceeds, d
	case x < c.retry:
		return attemptRetries, d
	case x < c.deferred:
		return attemptDefers, d
	case x < c.reject:
		return attemptRejects, d
	}
	return attemptPanics, d
}

// escapeQueues hands a source readers that call check before each
// Receive of one letter, and back with the letters each Receive returns.
type escapeQueues struct {
	topology.Queues[int]
	check func()
	back  func([]topology.Letter[int])
}

func (q escapeQueues) Subscribe(ctx context.Context) (topology.Reader[int], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	return escapeReader{Reader: r, q: q}, nil
}

type escapeReader struct {
	topology.Reader[int]
	q escapeQueues
}

func (r escapeReader) Receive(ctx context.Context, dst []topology.Letter[int]) (int, error) {
	if len(dst) == 1 {
		r.q.check()
	}
	n, err := r.Reader.Receive(ctx, dst)
	r.q.back(dst[:n])
	return n, err
}

// seqSoakRecord is what the handler saw.
type seqSoakRecord struct {
	mu        sync.Mutex
	inFlight  map[string]int   // handler calls under way per key
	attempts  map[string][]int // values handled per key, every attempt, in order
	succeeded map[string][]int // values handled successfully per key, in order
	tries     map[int]int      // attempts per value
	failures  int              // attempts sent to a hold queue (retries, defers, panics)
	calls     int              // handler calls so far
	overlaps  map[string][]int // per key, values handled while another of the key was
	// out marks the keys whose message was sent to a hold queue and not
	// handled again yet; unordered those that had one out when the
	// pipeline stopped: documented outside the key's order, it may come
	// back after the key's later messages (docs/topology.md).
	out, unordered map[string]bool
	// outVals are the keyed messages sent to a hold queue since the
	// handler returned and not received back yet.
	outVals map[int]bool
}

// Guarantee: a sequenced source over the in-memory backend, with hold
// queues and a DLQ, whatever its MaxHeldBack, MaxBatch, permit window,
// processors and policy, whatever each attempt does (succeed, fail,
// defer, reject, panic), and across stops of its pipeline with messages
// in flight: each key's messages are handled one at a time, in publish
// order, successfully at most once; every message ends exactly once,
// handled successfully or in the DLQ (in publish order per key); the
// messages held back never exceed MaxHeldBack except in an escape, taken
// only while every key with messages held back waits on one out in a
// hold queue, and warned of first; and each pipeline and source stop leaving nothing
// behind. A key with a message out in a hold queue when a pipeline stops
// is outside its order from then on, as documented. Random seeds: 40 by
// default, BOULEVARD_SEQ_SOAK_SEEDS=N for N.
func TestSequencedSoakKeepsOrderEndsEachMessageOnceAndBoundsHeldBack(t *testing.T) {
	n := testsize.Count(t, "BOULEVARD_SEQ_SOAK_SEEDS", 8, 40)
	testsize.Seeds(t, n, func(t *testing.T, seed uint64, rng *rand.Rand) {
		c := newSeqSoakConfig(rng)
		t.Logf("%+v", c)
		seqSoakOnce(t, seed, rng, c)
	})
}

func seqSoakOnce(t *testing.T, seed uint64, rng *rand.Rand, c seqSoakConfig) {
	m, err := topology.NewMemory[int](topology.MemoryOptions{Capacity: c.capacity})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	b := topology.New("soak").Sequenced(c.policy).RoutingShards(c.shards).DLQ()
	for _, h := range c.holds {
		b = b.Hold(h)
	}
	top, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	q, err := m.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Records{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("refused hand-offs (the in-memory backend loses their letters): %d", logs.Count(slog.LevelError, topology.HandOffFailedLog))
		}
	})
	// src is the running source, srcs every source so far.
	var srcMu sync.Mutex
	var src *topology.Source[int]
	var srcs []*topology.Source[int]
	current := func() *topology.Source[int] {
		srcMu.Lock()
		defer srcMu.Unlock()
		return src
	}

	// keys[v] is the key of message v; values are published in order.
	keys := make([]string, c.messages)
	for v := range keys {
		keys[v] = "k" + strconv.Itoa(rng.IntN(c.keys))
		if c.unkeyed && rng.IntN(5) == 0 {
			keys[v] = "" // no order, never held back
		}
	}
	// Guarantee (3), checked by the handler and while waiting: past
	// MaxHeldBack only after an escape's warning, logged since the
	// letters held back were last seen below MaxHeldBack (the source
	// takes none past it without passing through that warning, which it
	// logs before the letter is taken).
	var boundMu sync.Mutex
	maxSeen, overSeen, warnsAtDip := 0, 0, 0
	checkBound := func(where string) {
		boundMu.Lock()
		defer boundMu.Unlock()
		before := logs.Count(slog.LevelWarn, overdrawWarning)
		st := current().Stats()
		after := logs.Count(slog.LevelWarn, overdrawWarning)
		// The escape is taken only when every key with letters held back
		// waits on a message out: counts its decision rests on.
		if err := topology.CheckSequencer(current()); err != nil {
			t.Errorf("%s: %v", where, err)
		}
		switch {
		case st.HeldBack < c.maxHeldBack:
			warnsAtDip = before
		case st.HeldBack > c.maxHeldBack:
			maxSeen, overSeen = max(maxSeen, st.HeldBack), overSeen+1
			if after <= warnsAtDip {
				t.Errorf("%s: %d held back, past MaxHeldBack %d, with no escape warned of since it was below (%d warnings); stats %+v",
					where, st.HeldBack, c.maxHeldBack, after, st)
			}
		}
	}

	stopNow := make(chan struct{}, 1)
	rec := &seqSoakRecord{inFlight: map[string]int{}, attempts: map[string][]int{},
		succeeded: map[string][]int{}, tries: map[int]int{}, out: map[string]bool{}, unordered: map[string]bool{"": true},
		overlaps: map[string][]int{}, outVals: map[int]bool{}}
	handle := func(_ context.Context, msg *message.Message[int]) (int, error) {
		v := msg.Data
		k := keys[v]
		rec.mu.Lock()
		rec.inFlight[k]++
		if rec.inFlight[k] > 1 {
			rec.overlaps[k] = append(rec.overlaps[k], v)
		}
		rec.out[k] = false
		rec.attempts[k] = append(rec.attempts[k], v)
		rec.tries[v]++
		attempt := rec.tries[v]
		rec.calls++
		if slices.Contains(c.stops, rec.calls) {
			select {
			case stopNow <- struct{}{}:
			default:
			}
		}
		rec.mu.Unlock()
		checkBound("handler")
		out, d := c.outcome(seed, v, attempt)
		if d > 0 {
			time.Sleep(d) // fake time: other keys move meanwhile
		}
		rec.mu.Lock()
		rec.inFlight[k]--
		switch out {
		case attemptSucceeds:
			rec.succeeded[k] = append(rec.succeeded[k], v)
		case attemptRetries, attemptDefers, attemptPanics:
			rec.failures++
			rec.out[k] = true
			if d, _ := topology.DeliveryOf(msg); k != "" && (out == attemptDefers || d.Retries < max(c.maxRetries, 0)) {
				rec.outVals[v] = true // not dead-lettered: held
			}
		}
		rec.mu.Unlock()
		switch out {
		case attemptRetries:
			return 0, topology.Retry(errors.New("flaky"))
		case attemptDefers:
			return 0, topology.Defer()
		case attemptRejects:
			return 0, topology.Reject(errors.New("bad"))
		case attemptPanics:
			panic("handler panics")
		}
		return v, nil
	}
	// The escape: the source asks its reader for one letter while it
	// holds MaxHeldBack back (their count can only have fallen since it
	// decided), which it may only when every key it holds letters back for
	// waits on a message out in a hold queue. Only this goroutine adds
	// such keys, or brings such a message back.
	eq := escapeQueues{Queues: q,
		check: func() {
			s := current()
			held := s.Stats().HeldBack
			if held < c.maxHeldBack {
				return
			}
			waiting := topology.WaitingKeys(s)
			rec.mu.Lock()
			defer rec.mu.Unlock()
			out := map[string]bool{}
			for v := range rec.outVals {
				out[keys[v]] = true
			}
			for _, k := range waiting {
				if !out[k] {
					t.Errorf("the source takes a letter past MaxHeldBack %d (%d held back) while key %s, with letters held back, has no message out in a hold queue", c.maxHeldBack, held, k)
				}
			}
			if len(waiting) == 0 {
				t.Errorf("the source takes a letter past MaxHeldBack %d (%d held back) with no key waiting", c.maxHeldBack, held)
			}
		},
		back: func(ls []topology.Letter[int]) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for _, l := range ls {
				delete(rec.outVals, l.Value)
			}
		},
	}
	start := func() *pipeline.Pipeline[int, int] {
		s, err := topology.NewSource(topology.SourceOptions[int]{Queues: eq, MaxHeldBack: c.maxHeldBack,
			MaxBatch: c.maxBatch, MaxRetries: c.maxRetries, Logger: slog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pipeline.New(pipeline.Options[int, int]{
			Name:       "soak",
			Logger:     slog.New(slog.DiscardHandler),
			Producer:   producer.Options[int]{Source: s, Flow: c.flow, Concurrency: c.producers},
			Processors: processor.Options[int, int]{Concurrency: c.processors, Handle: handle},
		})
		if err != nil {
			t.Fatal(err)
		}
		boundMu.Lock()
		srcMu.Lock()
		src, srcs = s, append(srcs, s)
		srcMu.Unlock()
		warnsAtDip = logs.Count(slog.LevelWarn, overdrawWarning)
		boundMu.Unlock()
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Stop(context.Background()) })
		return p
	}
	stop := func(p *pipeline.Pipeline[int, int]) {
		if err := p.Stop(context.Background()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := p.Err(); err != nil {
			t.Fatalf("Err: %v", err)
		}
		if st := current().Stats(); st.HeldBack != 0 || st.Subscriptions != 0 {
			t.Errorf("after Stop: stats %+v, want nothing held back and no reader", st)
		}
	}
	// total sums the counters of every source so far.
	total := func() (st topology.Stats) {
		srcMu.Lock()
		defer srcMu.Unlock()
		for _, s := range srcs {
			x := s.Stats()
			st.Received += x.Received
			st.Acked += x.Acked
			st.Retried += x.Retried
			st.DeadLettered += x.DeadLettered
			st.Poisoned += x.Poisoned
		}
		return st
	}
	p := start()
	began := time.Now()

	// A DLQ consumer: the in-memory DLQ holds Capacity letters (and as
	// many waiting for room), the soak dead-letters more.
	dlq, _ := top.DLQ()
	dr, err := q.SubscribeDead(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dctx, stopDrain := context.WithCancel(context.Background())
	drained := make(chan []topology.Letter[int], 1)
	go func() {
		defer func() { _ = dr.Close(context.Background()) }()
		var got []topology.Letter[int]
		buf := make([]topology.Letter[int], 16)
		for {
			n, err := dr.Receive(dctx, buf)
			got = append(got, buf[:n]...)
			if err != nil {
				drained <- got
				return
			}
		}
	}()
	t.Cleanup(stopDrain)

	pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{Key: func(v int) string { return keys[v] }})
	gaps := make([]time.Duration, c.bursts)
	for i := range gaps {
		gaps[i] = time.Duration(rng.IntN(3000)) * time.Millisecond
	}
	published := make(chan error, 1)
	go func() {
		per := (c.messages + c.bursts - 1) / c.bursts
		for v := range c.messages {
			if v%per == 0 {
				time.Sleep(gaps[v/per])
			}
			if err := pub.Publish(context.Background(), v); err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()
	// Every message ends (acked or dead-lettered) within an hour of fake
	// time; the bound is checked meanwhile.
	ended := func() bool {
		st := total()
		return st.Acked+st.DeadLettered >= uint64(c.messages)
	}
	for end := time.Now().Add(time.Hour); !ended(); {
		checkBound("poll")
		select {
		case <-stopNow:
			stop(p)
			rec.mu.Lock()
			for k, out := range rec.out {
				if out {
					rec.unordered[k] = true
				}
			}
			t.Logf("stopped at %v; keys outside their order from then on: %v", time.Since(began), rec.unordered)
			rec.mu.Unlock()
			p = start()
		case <-time.After(10 * time.Millisecond):
		}
		select {
		case err := <-published:
			if err != nil {
				t.Fatalf("publish: %v", err)
			}
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("after an hour %d of %d messages ended; stats %+v, DLQ %d", total().Acked+total().DeadLettered,
				c.messages, current().Stats(), m.Queued(dlq, ""))
		}
	}
	stop(p)
	st := total()

	// The DLQ, in order: every dead letter has reached the drainer.
	for end := time.Now().Add(time.Minute); m.Queued(dlq, "") > 0; {
		if time.Now().After(end) {
			t.Fatalf("%d letters still in the DLQ after a minute", m.Queued(dlq, ""))
		}
		time.Sleep(time.Millisecond)
	}
	stopDrain()
	deadLetters := <-drained
	dead := map[int]int{}
	deadByKey := map[string][]int{}
	nd := len(deadLetters)
	for _, l := range deadLetters {
		dead[l.Value]++
		deadByKey[l.Key] = append(deadByKey[l.Key], l.Value)
		if l.Key != keys[l.Value] {
			t.Errorf("dead letter %d has key %q, want %q", l.Value, l.Key, keys[l.Value])
		}
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for k, vs := range rec.overlaps {
		if !rec.unordered[k] {
			t.Errorf("key %s: %v handled while another message of the key was", k, vs)
		}
	}
	// (1) Per key: every attempt, and so every success, in publish order;
	// a message handled successfully at most once, and at least once
	// unless dead-lettered.
	succ := map[int]int{}
	for k, vs := range rec.attempts {
		if !slices.IsSorted(vs) && !rec.unordered[k] {
			t.Errorf("key %s: attempts in the order %v, want publish order", k, vs)
		}
	}
	for k, vs := range rec.succeeded {
		if !slices.IsSorted(vs) && !rec.unordered[k] {
			t.Errorf("key %s: handled successfully in the order %v, want publish order", k, vs)
		}
		for _, v := range vs {
			succ[v]++
		}
	}
	// (2) Every message ends exactly once.
	for v := range c.messages {
		switch {
		case succ[v] > 1:
			t.Errorf("message %d (key %s) handled successfully %d times", v, keys[v], succ[v])
		case dead[v] > 1:
			t.Errorf("message %d (key %s) dead-lettered %d times", v, keys[v], dead[v])
		case succ[v]+dead[v] == 0:
			t.Errorf("message %d (key %s) neither handled successfully nor dead-lettered (%d attempts)", v, keys[v], rec.tries[v])
		case succ[v]+dead[v] > 1:
			t.Errorf("message %d (key %s) handled successfully and dead-lettered", v, keys[v])
		}
	}
	for k, vs := range deadByKey {
		if !slices.IsSorted(vs) && !rec.unordered[k] {
			t.Errorf("key %s: dead-lettered in the order %v, want publish order", k, vs)
		}
	}
	if nsucc := len(succ); st.Acked != uint64(nsucc) || st.DeadLettered != uint64(nd) {
		t.Errorf("stats %+v: want %d acked and %d dead-lettered", st, nsucc, nd)
	}
	// (3) The escape is warned of once per episode, and an episode needs a
	// message sent to a hold queue: no more warnings than such attempts.
	if warns := logs.Count(slog.LevelWarn, overdrawWarning); warns > rec.failures {
		t.Errorf("%d escape warnings, more than the %d retried attempts", warns, rec.failures)
	}
	if overSeen > 0 {
		t.Logf("held back past MaxHeldBack %d in %d samples (at most %d)", c.maxHeldBack, overSeen, maxSeen)
	}
	// (4) Nothing left behind (each stop checks its source's stats).
	if n := m.Queued("soak", top.ConsumerGroup()); n != 0 {
		t.Errorf("after Stop: %d letters in the main queue, want none", n)
	}
	for _, h := range top.Holds() {
		if n := m.Held(h.Name); n != 0 {
			t.Errorf("after Stop: %d letters in hold queue %s, want none", n, h.Name)
		}
	}
}
