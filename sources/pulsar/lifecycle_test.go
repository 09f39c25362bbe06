package pulsar_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// stateLog records active-state reports.
type stateLog struct {
	mu     sync.Mutex
	states []bpulsar.ActiveState
}

func (l *stateLog) add(s bpulsar.ActiveState) {
	l.mu.Lock()
	l.states = append(l.states, s)
	l.mu.Unlock()
}

func (l *stateLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.states)
}

func (l *stateLog) last() (bpulsar.ActiveState, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.states) == 0 {
		return bpulsar.ActiveState{}, false
	}
	return l.states[len(l.states)-1], true
}

// On a failover subscription the callback hears which consumer is active;
// when the active one goes away the standby is told it took over and
// receives the messages. A panicking callback is contained and counted, and
// its consumer keeps working.
func TestFailoverActiveStateCallback(t *testing.T) {
	e := newEnv(t)
	e.publish("fo", "x", 1) // create the topic
	var first, second stateLog
	r1, r2 := newReceived(), newReceived()
	// Consumers are named after their stage and the source's suffix,
	// "<pipeline>.producer.<i>-t": for the topic "fo" the broker's hash ring
	// makes fo-first's consumer the active one whichever joins first.
	named := func(name string, src *bpulsar.Source, r *received) pipeline.Options[[]byte, []byte] {
		return pipeline.Options[[]byte, []byte]{Name: name, Logger: testLogger(), ShutdownTimeout: 10 * time.Second,
			Producer:   producer.Options[[]byte]{Source: src},
			Processors: processor.Options[[]byte, []byte]{Concurrency: 2, Handle: recordAll(r)}}
	}
	src1 := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"fo"}, Subscription: "sub", NameSuffix: "t",
		SubscriptionType: bpulsar.Failover, ActiveStateCallback: first.add, Consumer: earliest(), Logger: testLogger()})
	_, stop1 := start(t, named("fo-first", src1, r1))
	wait.Within(t, waitLimit, "the first consumer to be reported active", func() bool { s, ok := first.last(); return ok && s.Active })

	panicked := false
	recs := newRecords()
	src2 := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"fo"}, Subscription: "sub", NameSuffix: "t",
		SubscriptionType: bpulsar.Failover, Consumer: earliest(), Logger: testLogger(),
		ActiveStateCallback: func(s bpulsar.ActiveState) {
			second.add(s)
			if !panicked {
				panicked = true
				panic("callback bug")
			}
		}})
	opts2 := named("fo-second", src2, r2)
	opts2.Logger = slog.New(recs) // the stage's logger, where the callback's panic is logged
	_, stop2 := start(t, opts2)
	wait.Within(t, waitLimit, "the second consumer to be reported passive", func() bool { s, ok := second.last(); return ok && !s.Active })
	wait.Within(t, waitLimit, "the panic to be counted", func() bool { return src2.Stats().CallbackPanics == 1 })
	checkCallbackPanicLogged(t, recs, "callback bug")

	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, waitLimit, "the second consumer to take over", func() bool { s, ok := second.last(); return ok && s.Active })
	e.publish("fo", "after", 20)
	wait.Within(t, waitLimit, "the new active consumer to handle the messages", func() bool { return r2.distinct() >= 20 })
	if err := stop2(); err != nil {
		t.Fatal(err)
	}

	s, _ := second.last()
	if s.Topic != pulsartest.FullTopicName("fo") || s.BaseTopic != s.Topic || s.Partition != -1 {
		t.Errorf("report names topic %q base %q partition %d", s.Topic, s.BaseTopic, s.Partition)
	}
	if s.Subscription != "sub" || s.Consumer == nil || s.Stage != 0 {
		t.Errorf("report subscription %q consumer %v stage %d", s.Subscription, s.Consumer, s.Stage)
	}
	f, _ := first.last()
	if f.Consumer == s.Consumer {
		t.Error("both pipelines reported the same consumer")
	}
	if src1.Stats().CallbackPanics != 0 {
		t.Error("a callback that did not panic was counted")
	}
}

// A consumer closed under its stage makes the stage fail and restart with a
// new consumer: nothing is lost, and outcomes of the messages the old
// consumer delivered are dropped (and counted), the broker redelivering them.
func TestConsumerClosedRestarts(t *testing.T) {
	e := newEnv(t)
	want := e.publish("death", "m", 400)
	r := newReceived()
	g := newGate()
	var blockOnce sync.Once
	blocked := make(chan struct{})
	handle := func(ctx context.Context, m *message.Message[[]byte]) ([]byte, error) {
		r.add(m)
		md, _ := message.MetadataAs[*bpulsar.Metadata](m)
		if md.RedeliveryCount == 0 && string(m.Data) == "m-100" {
			blockOnce.Do(func() { close(blocked) })
			<-g.ch
		}
		return m.Data, nil
	}
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"death"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	p, _ := start(t, pipeline.Options[[]byte, []byte]{
		Name:   "death",
		Logger: testLogger(),
		// A window larger than the topic: while the handler is blocked the
		// stage still has permits, so its consumer is waiting on the client
		// (where a closed consumer shows at once) rather than on the stage.
		// TestConsumerClosedWithoutPermitsNoticed covers the other case.
		Producer:   producer.Options[[]byte]{Source: src, Flow: producer.Flow{Initial: 1000}, Restart: producer.Restart{Backoff: 20 * time.Millisecond}},
		Processors: processor.Options[[]byte, []byte]{Concurrency: 1, Handle: handle},
	})
	defer g.open() // before the stop, even when the test fails
	<-blocked
	wait.Within(t, waitLimit, "the stage to take every message from the client", func() bool {
		cs := e.broker.Consumers("death", "sub")
		return len(cs) == 1 && cs[0].Dispatched == int64(len(want))
	})
	if !src.CloseConsumerForTest() {
		t.Fatal("no open consumer to close")
	}
	wait.Within(t, waitLimit, "the stage to replace its consumer", func() bool { return src.Stats().Replaced == 1 })
	g.open()
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(want) })
	wait.Within(t, waitLimit, "the backlog to empty", func() bool { return e.broker.Backlog("death", "sub") == 0 })
	if src.Stats().DroppedAcks == 0 {
		t.Error("outcomes of the replaced consumer's messages were not dropped")
	}
	cs := e.broker.Consumers("death", "sub")
	if len(cs) < 2 || !cs[len(cs)-1].Connected {
		t.Errorf("want the replacement consumer connected after the closed one, got %+v", cs)
	}
	if err := p.Err(); err != nil {
		t.Errorf("pipeline error after a restart: %v", err)
	}
}

// When the broker drops every connection the client reconnects its
// consumers and the unacknowledged messages come back: nothing is lost.
func TestDropConnectionsNothingLost(t *testing.T) {
	e := newEnv(t)
	want := e.publish("drop", "m", 1000)
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"drop"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	_, stop := run(t, src, 2, producer.Flow{Initial: 10}, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		r.add(m)
		time.Sleep(100 * time.Microsecond)
		return m.Data, nil
	})
	wait.Within(t, waitLimit, "some messages handled", func() bool { return r.distinct() >= 200 })
	// Both stages hold their consumers: the drop meets two subscribed
	// consumers, which the client reconnects.
	wait.Within(t, waitLimit, "both stages subscribed", func() bool { return src.Stats().Consumers == 2 })
	e.broker.DropConnections()
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(want) })
	wait.Within(t, waitLimit, "the backlog to empty", func() bool { return e.broker.Backlog("drop", "sub") == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A subscribe the broker refuses fails the stage, which is restarted with
// backoff until the broker accepts; a refusal that lasts stops the pipeline
// with a restart error wrapping ErrSubscribe.
func TestRefusedSubscribe(t *testing.T) {
	t.Run("recovers", func(t *testing.T) {
		e := newEnv(t)
		want := e.publish("refuse", "m", 50)
		e.broker.RefuseSubscribe("refuse", "sub", errors.New("not now"))
		r := newReceived()
		src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"refuse"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
		p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
			Name:       "refuse",
			Logger:     testLogger(),
			Producer:   producer.Options[[]byte]{Source: src, Restart: producer.Restart{MaxRestarts: 50, Window: time.Minute, Backoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}},
			Processors: processor.Options[[]byte, []byte]{Handle: recordAll(r)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		if r.distinct() != 0 {
			t.Fatal("messages consumed through a refused subscription")
		}
		e.broker.RefuseSubscribe("refuse", "sub", nil)
		wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(want) })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("gives up", func(t *testing.T) {
		e := newEnv(t)
		e.publish("refuse", "m", 1)
		e.broker.RefuseSubscribe("refuse", "sub", errors.New("never"))
		src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"refuse"}, Subscription: "sub", Logger: testLogger()})
		err := runUntilGivenUp(t, "refuse", src, 2, testLogger())
		var re *producer.RestartError
		if !errors.As(err, &re) || !errors.Is(err, bpulsar.ErrSubscribe) {
			t.Fatalf("want a restart error wrapping ErrSubscribe, got %v", err)
		}
		var ce *bpulsar.ConsumerError
		if !errors.As(err, &ce) || ce.Topic != "refuse" || ce.Subscription != "sub" {
			t.Fatalf("want a *ConsumerError naming topic and subscription, got %v", err)
		}
	})
}

// Stopping drains: every message handled before the stop is acked, nothing
// unhandled is acked, and the rest stays in the backlog for the next run.
func TestDrain(t *testing.T) {
	e := newEnv(t)
	want := e.publish("drain", "m", 300)
	r := newReceived()
	slow := func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		time.Sleep(2 * time.Millisecond)
		r.add(m)
		return m.Data, nil
	}
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"drain"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	_, stop := run(t, src, 1, producer.Flow{Initial: 20}, slow)
	wait.Within(t, waitLimit, "some messages handled", func() bool { return r.distinct() >= 50 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	handled := r.distinct()
	if handled >= len(want) {
		t.Fatalf("all %d messages were handled before the stop took effect", handled)
	}
	wait.Within(t, waitLimit, "the broker to count the drained acks", func() bool { return e.sumAcked("drain", "sub", 0) == int64(handled) })
	if b := e.broker.Backlog("drain", "sub"); b != int64(len(want)-handled) {
		t.Errorf("backlog %d after %d of %d were handled, want %d", b, handled, len(want), len(want)-handled)
	}
	// The next run picks up exactly the rest.
	src2 := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"drain"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	_, stop2 := run(t, src2, 1, producer.Flow{}, recordAll(r))
	wait.Within(t, waitLimit, "the rest handled", func() bool { return r.distinct() == len(want) })
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	counts, _ := r.snapshot()
	for _, w := range want {
		if counts[w] != 1 {
			t.Errorf("%s handled %d times across the two runs, want 1", w, counts[w])
		}
	}
}

// A consumer closed while its stage has no permits (the processors are
// stuck and the stage holds the whole window) is noticed while they are
// still stuck: the stage fails and its consumers are replaced without
// waiting for permits to come back, and nothing is lost.
func TestConsumerClosedWithoutPermitsNoticed(t *testing.T) {
	e := newEnv(t)
	want := e.publish("starved", "m", 2000)
	r := newReceived()
	g := newGate()
	handle := recordAfter(g, r)
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"starved"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	p, _ := start(t, pipeline.Options[[]byte, []byte]{
		Name:       "starved",
		Logger:     testLogger(),
		Producer:   producer.Options[[]byte]{Source: src, Flow: producer.Flow{Initial: 10}, Restart: producer.Restart{Backoff: 20 * time.Millisecond}},
		Processors: processor.Options[[]byte, []byte]{Concurrency: 1, Handle: handle},
	})
	defer g.open() // before the stop, even when the test fails
	e.waitStarved(src, "starved", "sub", len(want))
	if !src.CloseConsumerForTest() {
		t.Fatal("no open consumer to close")
	}
	wait.Within(t, waitLimit, "the closed consumer to be noticed while the handler is stuck", func() bool { return src.Stats().Replaced == 1 })
	g.open()
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(want) })
	wait.Within(t, waitLimit, "the backlog to empty", func() bool { return e.broker.Backlog("starved", "sub") == 0 })
	if err := p.Err(); err != nil {
		t.Errorf("pipeline error after a restart: %v", err)
	}
}

// waitStarved waits until the broker stops dispatching to the one consumer
// of sub on topic while the handler is stuck: the client's queue, its
// channel, the stage buffer and the processors' input are full, and the
// stage is out of permits. The stage of src must hold that consumer and
// the broker must have dispatched to it: a count that stays at 0 while the
// subscribe's answer is on its way to the client is no starvation. It fails
// the test if all published messages were dispatched, as the stage then
// never ran out.
func (e *env) waitStarved(src *bpulsar.Source, topic, sub string, published int) {
	e.t.Helper()
	var (
		last  int64 = -1
		since time.Time
	)
	wait.Within(e.t, waitLimit, "dispatch to stop while the handler is stuck", func() bool {
		cs := e.broker.Consumers(topic, sub)
		if len(cs) != 1 || cs[0].Dispatched == 0 || src.Stats().Consumers != 1 {
			last = -1
			return false
		}
		if cs[0].Dispatched != last {
			last, since = cs[0].Dispatched, time.Now()
		}
		return time.Since(since) >= 200*time.Millisecond
	})
	if last >= int64(published) {
		e.t.Fatalf("the broker dispatched all %d messages; the stage never ran out of permits", last)
	}
}

// A stop while the client is reconnecting a consumer whose stage has no
// permits (the processors are stuck, the broker refuses to subscribe it
// again) closes the consumer under the reconnection and returns well
// within its shutdown timeout, with no error and no client call left
// behind (goleak checks the last).
func TestStopDuringReconnectionReturnsPromptly(t *testing.T) {
	const shutdown = 10 * time.Second
	e := newEnv(t)
	want := e.publish("reconnecting", "m", 500)
	g := newGate()
	handle := recordAfter(g, newReceived())
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"reconnecting"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	_, stop := start(t, pipeline.Options[[]byte, []byte]{
		Name:            "reconnecting",
		Logger:          testLogger(),
		ShutdownTimeout: shutdown,
		Producer:        producer.Options[[]byte]{Source: src, Flow: producer.Flow{Initial: 10}},
		Processors:      processor.Options[[]byte, []byte]{Concurrency: 1, Handle: handle},
	})
	defer g.open() // before the stop, even when the test fails
	e.waitStarved(src, "reconnecting", "sub", len(want))
	e.broker.RefuseSubscribe("reconnecting", "sub", errors.New("not now"))
	e.broker.DropConnections()
	// Five refused attempts (the client's backoff starts at 100 ms and
	// doubles) make a reconnection of a second and a half or more, during
	// which the stage keeps waiting for permits.
	wait.Within(t, waitLimit, "the client to retry its subscribe while reconnecting", func() bool {
		return e.broker.Stats().SubscribesRefused >= 5
	})
	g.open()
	began := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Stop during a reconnection: %v", err)
	}
	if took := time.Since(began); took >= shutdown {
		t.Fatalf("Stop took %v, the whole shutdown timeout", took)
	}
}

// A consumer the client closes on its own, having given up reconnecting
// it (ConsumerOptions.MaxReconnectToBroker), fails its stage with the
// client's cause; the stage is restarted with a new consumer once the
// broker accepts it again, and nothing is lost.
func TestReconnectionGivenUpRestartsTheStage(t *testing.T) {
	e := newEnv(t)
	want := e.publish("given-up", "m", 300)
	r := newReceived()
	g := newGate()
	handle := recordAfter(g, r)
	logs := newRecords()
	giveUpAfter := uint(1)
	co := earliest()
	co.MaxReconnectToBroker = &giveUpAfter
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"given-up"}, Subscription: "sub", Consumer: co})
	p, _ := start(t, pipeline.Options[[]byte, []byte]{
		Name:       "given-up",
		Logger:     slog.New(logs),
		Producer:   producer.Options[[]byte]{Source: src, Flow: producer.Flow{Initial: 10}, Restart: producer.Restart{Backoff: 20 * time.Millisecond}},
		Processors: processor.Options[[]byte, []byte]{Concurrency: 1, Handle: handle},
	})
	defer g.open() // before the stop, even when the test fails
	e.waitStarved(src, "given-up", "sub", len(want))
	e.broker.RefuseSubscribe("given-up", "sub", errors.New("not now"))
	e.broker.DropConnections()
	wait.Within(t, waitLimit, "the given-up consumer to be replaced", func() bool { return src.Stats().Replaced >= 1 })
	e.broker.RefuseSubscribe("given-up", "sub", nil)
	g.open()
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(want) })
	wait.Within(t, waitLimit, "the backlog to empty", func() bool { return e.broker.Backlog("given-up", "sub") == 0 })
	named := false
	for _, l := range logs.snapshot() {
		named = named || strings.Contains(l.text, "max retry attempts reached")
	}
	if !named {
		t.Error("no log line names the client's cause for closing the consumer")
	}
	if err := p.Err(); err != nil {
		t.Errorf("pipeline error after a restart: %v", err)
	}
}

// Guarantee: a consumer whose subscribe completes after the source was
// closed is closed at once: once the pipeline has stopped, the source
// holds no consumer on the broker.
func TestAConsumerSubscribedAfterTheSourceClosedIsClosed(t *testing.T) {
	e := newEnv(t)
	release := e.broker.Withhold(pulsartest.CommandSubscribe)
	t.Cleanup(release)
	recs := newRecords()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"late"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	_, stop := start(t, pipeline.Options[[]byte, []byte]{
		Name:       "late",
		Logger:     slog.New(recs),
		Producer:   producer.Options[[]byte]{Source: src},
		Processors: processor.Options[[]byte, []byte]{Handle: recordAll(newReceived())},
	})
	wait.Within(t, waitLimit, "the subscribe withheld", func() bool { return e.broker.Stats().Withheld > 0 })
	// Closes the source while the subscribe call runs; an ended context
	// does not wait for that call.
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	_ = src.Close(ended)
	release()
	wait.Within(t, waitLimit, "the late subscribe returned to the source", func() bool {
		_, ok := recs.first(slog.LevelDebug, "pulsar consumer subscribed")
		return ok
	})
	if err := stop(); err != nil {
		t.Logf("Stop: %v", err)
	}
	wait.Within(t, waitLimit, "no consumer of the closed source left connected", func() bool { return e.connectedCount("late", "sub", 0) == 0 })
}

// checkCallbackPanicLogged checks that recs holds the ERROR line of a
// panicking active-state callback, whose error is a *CallbackPanicError
// wrapping ErrCallbackPanic, with the panic's value and the stack.
func checkCallbackPanicLogged(t *testing.T, recs *records, value any) {
	t.Helper()
	var l logged
	wait.Within(t, waitLimit, "the panicking active state callback's ERROR line", func() bool {
		var ok bool
		l, ok = recs.first(slog.LevelError, "pulsar active state callback panicked; the consumer keeps running")
		return ok
	})
	var logged error
	for _, a := range l.attrs {
		if a.Key == "error" {
			logged, _ = a.Value.Any().(error)
		}
	}
	var ce *bpulsar.CallbackPanicError
	if !errors.As(logged, &ce) || !errors.Is(logged, bpulsar.ErrCallbackPanic) {
		t.Fatalf("logged error %v, want a *CallbackPanicError wrapping ErrCallbackPanic", logged)
	}
	if ce.Value != value || len(ce.Stack) == 0 || ce.State.Subscription != "sub" {
		t.Errorf("CallbackPanicError value %v, stack of %d bytes, subscription %q; want %v, a stack, %q", ce.Value, len(ce.Stack), ce.State.Subscription, value, "sub")
	}
}
