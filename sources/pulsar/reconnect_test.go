package pulsar_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// connected returns the broker's view of the connected consumers of sub on
// topic.
func connected(e *env, topic, sub string) []pulsartest.ConsumerStats {
	var out []pulsartest.ConsumerStats
	for _, c := range e.broker.Consumers(topic, sub) {
		if c.Connected {
			out = append(out, c)
		}
	}
	return out
}

// Guarantee: a connection dropped while the stage holds its share of the
// window, the client holds its receiver queue and acknowledgements are
// still grouped in the client, costs no permit: after the client
// reconnects, the new consumer's grants and pushes stay within the window
// of what left the stage, every refill of the stage is taken (no stall),
// the broker never counts more acknowledgements than messages handled, and
// the messages sent again after the drop are not counted as redeliveries
// (the broker does not raise their redelivery count).
func TestDropWithTheWindowHeldKeepsTheWindowAndFlows(t *testing.T) {
	const total = 600
	e := newEnv(t)
	e.publish("drop-window", "m", total)
	out := newGatedOutput()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"drop-window"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	startProducer(t, src, 1, producer.Flow{}, out)
	full := bpulsar.Stats{Consumers: 1, Received: 51, PermitsGranted: 100, PermitsAvailable: 49, ClientQueue: 49}
	wait.Within(t, waitLimit, "the stage to hold its share of the window", func() bool { return src.Stats() == full })

	// Twenty messages handled, their acknowledgements grouped in the
	// client (up to 100 ms) when the connection drops.
	out.allow(20)
	wait.Within(t, waitLimit, "the output to take its budget", func() bool { taken, _ := out.counts(); return taken == 20 })
	e.broker.DropConnections()
	wait.Within(t, waitLimit, "the client to reconnect the consumer", func() bool { return len(connected(e, "drop-window", "sub")) == 1 })
	acked := func() int64 { return e.sumAcked("drop-window", "sub", 0) }
	_, doneAtDrop := out.counts()
	settle(t, e, "drop-window", "sub", 0, 2)
	if a := acked(); a > int64(doneAtDrop) {
		t.Fatalf("the broker counted %d acknowledgements with %d messages handled", a, doneAtDrop)
	}
	cur := connected(e, "drop-window", "sub")[0]
	checkWindow(t, cur, 49, 0, 100)

	for step := 1; ; step++ {
		out.allow(50)
		wait.Within(t, waitLimit, "the output to take its budget after the reconnection", func() bool {
			taken, _ := out.counts()
			return taken == 20+50*step || e.broker.Backlog("drop-window", "sub") == 0
		}, func() string { return fmt.Sprintf("%+v", src.Stats()) })
		settle(t, e, "drop-window", "sub", 0, 2)
		_, done := out.counts()
		if a := acked(); a > int64(done) {
			t.Fatalf("the broker counted %d acknowledgements with %d messages handled", a, done)
		}
		cur = connected(e, "drop-window", "sub")[0]
		checkWindow(t, cur, 49, done-doneAtDrop, 100)
		if e.broker.Backlog("drop-window", "sub") == 0 {
			break
		}
		if step > 2*total/50 {
			t.Fatalf("backlog %d after %d steps", e.broker.Backlog("drop-window", "sub"), step)
		}
	}
	taken, _ := out.counts()
	s := src.Stats()
	if s.Received < total || int(s.Received) > taken+51+49 || s.Redelivered != 0 || s.Replaced != 0 || s.Consumers != 1 || s.ClientQueue != 49 {
		t.Fatalf("stats %+v after %d messages left the stage: want at least %d received, no redelivery counted, the consumer kept with its queue of 49", s, taken, total)
	}
}

// restartBroker replaces the test's broker with a new one on the same
// address, as a broker process that restarts with nothing kept: the
// client reconnects to it on its own.
func (e *env) restartBroker() {
	e.t.Helper()
	addr := e.broker.Addr().String()
	if err := e.broker.Close(); err != nil {
		e.t.Fatal(err)
	}
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{Addr: addr})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = b.Close() })
	e.broker = b
}

// Guarantee: a broker that restarts again and again during a run (a new
// broker on the same address, each time right after the pipeline handled
// everything the previous one had, with acknowledgements still grouped in
// the client) does not stop the pipeline: every message published to each
// broker is handled at least once and acknowledged there, and the
// pipeline goes on without an error.
func TestBrokerRestartsDeliverEveryMessageAndGoOn(t *testing.T) {
	const (
		restarts = 4
		perRun   = 200
	)
	e := newEnv(t)
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"restart"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	p, stop := run(t, src, 2, producer.Flow{Initial: 10}, recordAll(r))
	handled := func(want []string) func() bool {
		return func() bool {
			counts, _ := r.snapshot()
			for _, w := range want {
				if counts[w] == 0 {
					return false
				}
			}
			return true
		}
	}
	for i := range restarts + 1 {
		want := e.publish("restart", fmt.Sprintf("r%d", i), perRun)
		wait.Within(t, waitLimit, fmt.Sprintf("every message of broker %d handled", i), handled(want), func() string {
			return fmt.Sprintf("%d distinct handled, backlog %d, stats %+v", r.distinct(), e.broker.Backlog("restart", "sub"), src.Stats())
		})
		if i < restarts {
			// Both stages hold their consumers, so the restart meets two
			// subscribed consumers, which the client reconnects.
			wait.Within(t, waitLimit, "both stages subscribed", func() bool { return src.Stats().Consumers == 2 })
			e.restartBroker()
		}
	}
	wait.Within(t, waitLimit, "the last broker's backlog to empty", func() bool { return e.broker.Backlog("restart", "sub") == 0 })
	if err := p.Err(); err != nil {
		t.Errorf("pipeline error after the restarts: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// storm drops every connection of e's broker and unloads topic in turn,
// each tick, until the returned stop is called; stop waits for it and
// returns how many ticks it made.
func (e *env) storm(topic string, every time.Duration) (ticks *atomic.Int64, stop func()) {
	ticks = new(atomic.Int64)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			if ticks.Add(1)%2 == 0 {
				_ = e.broker.Unload(topic)
			} else {
				e.broker.DropConnections()
			}
		}
	})
	var once sync.Once
	return ticks, func() { once.Do(func() { close(done); wg.Wait() }) }
}

// Guarantee: Stop returns by its deadline while the broker drops every
// connection and unloads the topics again and again (the client keeps
// reconnecting every consumer of two stages on a partitioned and a plain
// topic), leaving no producer stage running; Close then returns once the
// client's calls end, and no goroutine is left behind (TestMain checks).
func TestStopDuringAReconnectStormReturnsByItsDeadline(t *testing.T) {
	e := newEnv(t)
	cl := e.patientClient()
	if err := e.broker.CreateTopic("storm", 2); err != nil {
		t.Fatal(err)
	}
	e.publish("storm", "a", 2000)
	e.publish("storm-b", "b", 2000)
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: cl, Topics: []string{"storm", "storm-b"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	p, _ := start(t, pipeline.Options[[]byte, []byte]{
		Name:     "storm",
		Logger:   testLogger(),
		Producer: producer.Options[[]byte]{Source: src, Concurrency: 2, Flow: producer.Flow{Initial: 10}},
		Processors: processor.Options[[]byte, []byte]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
			r.add(m)
			time.Sleep(time.Millisecond) // keep messages in flight through the storm
			return m.Data, nil
		}},
	})
	wait.Within(t, waitLimit, "some messages handled", func() bool { return r.distinct() >= 100 })
	ticks, stopStorm := e.storm("storm", 5*time.Millisecond)
	defer stopStorm()
	wait.Within(t, waitLimit, "the storm to go on for a while", func() bool { return ticks.Load() >= 40 })

	if n := r.distinct(); n == 4000 {
		t.Fatal("every message was handled before the stop: nothing in flight")
	}
	var te *pipeline.ShutdownTimeoutError
	// On a busy machine the deadline can also cut the source's Close,
	// whose context the pipeline then cancels: its error wraps
	// context.Canceled.
	if err := stopLeavingNoProducerStage(t, p, "during a reconnect storm"); err != nil && !errors.As(err, &te) &&
		!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Errorf("Stop during a reconnect storm: %v", err)
	}
	stopStorm()
	closeCtx, cancelClose := context.WithTimeout(context.Background(), waitLimit)
	defer cancelClose()
	if err := src.Close(closeCtx); err != nil {
		t.Errorf("Close after the storm: %v", err)
	}
}

// Guarantee: partitions added to a topic while the pipeline consumes it
// are found by the client (ConsumerOptions.AutoDiscoveryPeriod) and
// consumed by every stage's consumer of the topic, on the stage's own
// consumer, within its feed: every message, those published to the new
// partitions before the consumers found them included (the subscription
// starts at the latest position), is handled and acknowledged, no stage
// is restarted, and the reserve counted stays the one planned at the
// subscribe (docs/pulsar.md, Flow control).
func TestPartitionsAddedWhileConsumingAreConsumed(t *testing.T) {
	e := newEnv(t)
	if err := e.broker.CreateTopic("grow", 2); err != nil {
		t.Fatal(err)
	}
	r := newReceived()
	co := pulsar.ConsumerOptions{AutoDiscoveryPeriod: 100 * time.Millisecond}
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"grow"}, Subscription: "sub", Consumer: co, Logger: testLogger()})
	p, stop := run(t, src, 2, producer.Flow{Initial: 10}, recordAll(r))
	connectedOn := func(parts int) func() bool {
		return func() bool { return e.connectedCount("grow", "sub", parts) == 2*parts }
	}
	wait.Within(t, waitLimit, "2 stages × 2 partitions subscribed", func() bool { return connectedOn(2)() && src.Stats().Consumers == 2 })
	queue := src.Stats().ClientQueue
	first := e.publish("grow", "a", 200)
	wait.Within(t, waitLimit, "some messages handled", func() bool { return r.distinct() >= 50 })
	if err := e.broker.UpdatePartitions("grow", 4); err != nil {
		t.Fatal(err)
	}
	// Published at once, before the consumers can have found the new
	// partitions.
	second := e.publish("grow", "b", 400)
	wait.Within(t, waitLimit, "2 stages × 4 partitions subscribed", connectedOn(4))
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(first)+len(second) })
	wait.Within(t, waitLimit, "the backlog of every partition to empty", func() bool {
		var n int64
		for i := range 4 {
			n += e.broker.Backlog(pulsartest.PartitionTopic("grow", i), "sub")
		}
		return n == 0
	})
	_, meta := r.snapshot()
	onNew := 0
	for _, md := range meta {
		if md.Partition >= 2 {
			onNew++
		}
	}
	if onNew == 0 {
		t.Fatal("no message handled from the added partitions")
	}
	st := src.Stats()
	if st.Replaced != 0 || st.Consumers != 2 || st.ClientQueue != queue {
		t.Errorf("stats %+v: want no stage restarted, its 2 consumers kept and the client queue counted as planned (%d)", st, queue)
	}
	if err := p.Err(); err != nil {
		t.Errorf("pipeline error after the partitions were added: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// Guarantee: with messages nacked and redelivered while the broker drops
// every connection twice, the source's counters agree with what the
// handlers saw: Received is every delivery handled, Redelivered the
// deliveries whose RedeliveryCount is above 0, Nacked every failure; every
// message ends handled successfully and acknowledged.
func TestDropsWithNacksCountRedeliveriesAsDelivered(t *testing.T) {
	const total = 400
	e := newEnv(t)
	want := e.publish("drop-nack", "m", total)
	var (
		mu                        sync.Mutex
		calls, failures, redelivs int
		ok                        = map[string]bool{}
	)
	co := earliest()
	co.NackRedeliveryDelay = 10 * time.Millisecond
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"drop-nack"}, Subscription: "sub", Consumer: co, Logger: testLogger()})
	p, stop := run(t, src, 2, producer.Flow{Initial: 10}, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		md, _ := message.MetadataAs[*bpulsar.Metadata](m)
		mu.Lock()
		defer mu.Unlock()
		calls++
		if md.RedeliveryCount > 0 {
			redelivs++
		}
		// Every fifth message fails on its first delivery.
		if d := m.Data[len(m.Data)-1]; md.RedeliveryCount == 0 && (d == '0' || d == '5') && !ok[string(m.Data)] {
			failures++
			return nil, errors.New("first delivery fails")
		}
		ok[string(m.Data)] = true
		time.Sleep(100 * time.Microsecond) // keep messages in flight across the drops
		return m.Data, nil
	})
	handledOK := func() int { mu.Lock(); defer mu.Unlock(); return len(ok) }
	wait.Within(t, waitLimit, "some messages handled", func() bool { return handledOK() >= 100 })
	wait.Within(t, waitLimit, "both stages subscribed", func() bool { return src.Stats().Consumers == 2 })
	e.broker.DropConnections()
	wait.Within(t, waitLimit, "more messages handled", func() bool { return handledOK() >= 250 })
	e.broker.DropConnections()
	wait.Within(t, waitLimit, "every message handled successfully", func() bool { return handledOK() == len(want) })
	wait.Within(t, waitLimit, "the backlog to empty", func() bool { return e.broker.Backlog("drop-nack", "sub") == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.Err(); err != nil {
		t.Errorf("pipeline error after the drops: %v", err)
	}
	st := src.Stats()
	mu.Lock()
	defer mu.Unlock()
	if redelivs == 0 || failures == 0 {
		t.Fatalf("%d failures and %d redeliveries seen: the test nacked nothing", failures, redelivs)
	}
	if st.Received != int64(calls) || st.Redelivered != int64(redelivs) || st.Nacked != int64(failures) {
		t.Errorf("stats %+v: want %d received, %d redelivered and %d nacked, as the handlers saw", st, calls, redelivs, failures)
	}
}

// Guarantee: Stop returns by its deadline while the client is reconnecting
// consumers whose SUBSCRIBE the broker does not answer (the client would
// wait a minute, its operation timeout, for each), leaving no producer
// stage running; Close, called again while the consumers' closes still
// wait for the broker, returns by its deadline too, and once the broker
// answers it returns with every client call finished.
func TestStopWhileReconnectSubscribesHangReturnsByItsDeadline(t *testing.T) {
	e := newEnv(t)
	cl := e.patientClient()
	if err := e.broker.CreateTopic("hung-reconnect", 2); err != nil {
		t.Fatal(err)
	}
	e.publish("hung-reconnect", "m", 1000)
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: cl, Topics: []string{"hung-reconnect"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	p, _ := start(t, pipeline.Options[[]byte, []byte]{
		Name:       "hung-reconnect",
		Logger:     testLogger(),
		Producer:   producer.Options[[]byte]{Source: src, Concurrency: 2, Flow: producer.Flow{Initial: 10}},
		Processors: processor.Options[[]byte, []byte]{Handle: recordAll(r)},
	})
	wait.Within(t, waitLimit, "some messages handled", func() bool { return r.distinct() >= 10 })
	// Both stages subscribed: what is withheld is the reconnects of
	// subscribed consumers. (A connection dropped while the client is still
	// subscribing a partitioned topic can deadlock the client's Subscribe,
	// which SubscribeTimeout bounds; another test covers that.)
	wait.Within(t, waitLimit, "both stages subscribed", func() bool { return src.Stats().Consumers == 2 })
	release := e.broker.Withhold(pulsartest.CommandSubscribe)
	t.Cleanup(release) // before the pipeline stops
	e.broker.DropConnections()
	wait.Within(t, waitLimit, "a reconnecting subscribe withheld", func() bool { return e.broker.Stats().Withheld > 0 })

	stopLeavingNoProducerStage(t, p, "with the reconnecting subscribes withheld")
	// The consumers' closes still wait for the broker: Close, too, returns
	// by its own deadline.
	testbroker.ReturnsByDeadline(t, "Close with the reconnecting subscribes withheld", src.Close)
	release()
	closeCtx, cancelClose := context.WithTimeout(context.Background(), waitLimit)
	defer cancelClose()
	if err := src.Close(closeCtx); err != nil {
		t.Errorf("Close once the broker answers: %v", err)
	}
}

// runAway runs, in a pipeline of one stage stopped at the end of the
// test, a source of topic "away", subscription "sub", on a client of
// e's broker made by NewClient (so that it follows its consumers'
// reconnections), recording what it receives.
func runAway(t *testing.T, e *env) (*bpulsar.Source, *pipeline.Pipeline[[]byte, []byte], *received) {
	t.Helper()
	return runAwayLogging(t, e, nil)
}

// runAwayLogging is runAway with the client's lines going to own (nil:
// the source's logger, through NewClient's).
func runAwayLogging(t *testing.T, e *env, own plog.Logger) (*bpulsar.Source, *pipeline.Pipeline[[]byte, []byte], *received) {
	t.Helper()
	client, err := bpulsar.NewClient(pulsar.ClientOptions{URL: e.broker.URL(), OperationTimeout: time.Second, Logger: own}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	src := bpulsar.New(bpulsar.Options{Client: client, Topics: []string{"away"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	got := newReceived()
	p, stop := run(t, src, 1, producer.Flow{}, recordAll(got))
	t.Cleanup(func() { _ = stop() })
	return src, p, got
}

// Guarantee: Stats counts the failed attempts of the subscription's
// consumers to reconnect while their broker is away, and nothing while
// the topic is only quiet, so that an outage can be told from a quiet
// topic; once the broker is back the consumer reconnects, the count stops
// growing, and what is published then is received.
func TestStatsCountFailedReconnectionsWhileTheBrokerIsAway(t *testing.T) {
	e := newEnv(t)
	src, _, got := runAway(t, e)
	// The stage holds its consumer: the client's subscribe has returned, so
	// what the outage meets is a subscribed consumer reconnecting. (A
	// broker closed while the subscribe's answer is on its way fails the
	// subscribe, and the stage, which counts no reconnection.)
	wait.Within(t, waitLimit, "the consumer to subscribe", func() bool {
		return len(connected(e, "away", "sub")) == 1 && src.Stats().Consumers == 1
	})
	if n := src.Stats().ReconnectFailures; n != 0 {
		t.Fatalf("ReconnectFailures = %d on a quiet topic with its broker up, want 0", n)
	}
	addr := e.broker.Addr().String()
	if err := e.broker.Close(); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, waitLimit, "failed reconnections counted while the broker is away", func() bool {
		return src.Stats().ReconnectFailures >= 3
	}, func() string { return fmt.Sprintf("%+v", src.Stats()) })
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	e.broker = b
	wait.Within(t, waitLimit, "the consumer to reconnect", func() bool { return len(connected(e, "away", "sub")) == 1 })
	failures := src.Stats().ReconnectFailures
	e.publish("away", "m", 5)
	wait.Within(t, waitLimit, "the messages published after the outage", func() bool { return got.distinct() == 5 })
	if n := src.Stats().ReconnectFailures; n != failures {
		t.Errorf("ReconnectFailures went from %d to %d after the consumer reconnected", failures, n)
	}
}
