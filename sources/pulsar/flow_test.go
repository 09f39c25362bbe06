package pulsar_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// gatedOutput stands for the processors: it takes messages only while the
// test has given it budget, so the test decides when permits are charged.
// It acks every message it takes.
type gatedOutput struct {
	mu        sync.Mutex
	cond      *sync.Cond
	budget    int
	taken     int
	completed int // messages of Publish calls that returned
}

func newGatedOutput() *gatedOutput {
	o := &gatedOutput{}
	o.cond = sync.NewCond(&o.mu)
	return o
}

func (o *gatedOutput) Publish(ctx context.Context, msgs []*message.Message[[]byte]) (int, error) {
	stop := context.AfterFunc(ctx, func() {
		o.mu.Lock()
		o.cond.Broadcast()
		o.mu.Unlock()
	})
	defer stop()
	var g acker.Group
	defer g.Flush(ctx, nil)
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, m := range msgs {
		for o.taken >= o.budget {
			if ctx.Err() != nil {
				return i, ctx.Err()
			}
			o.cond.Wait()
		}
		o.taken++
		m.AddTo(&g)
	}
	o.completed += len(msgs)
	return len(msgs), nil
}

func (o *gatedOutput) allow(n int) {
	o.mu.Lock()
	o.budget += n
	o.cond.Broadcast()
	o.mu.Unlock()
}

func (o *gatedOutput) counts() (taken, completed int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.taken, o.completed
}

// startProducer runs the source in producer stages outside a pipeline,
// feeding out; it is stopped and the source closed at the end of the test.
func startProducer(t *testing.T, src *bpulsar.Source, concurrency int, flow producer.Flow, out producerOutput) producerRuntime {
	t.Helper()
	opts := producer.Options[[]byte]{Source: src, Concurrency: concurrency, Flow: flow}.WithDefaults()
	p := newProducerRuntime(opts, "flow", testLogger(), out)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	p.Start(ctx, &wg, func(err error) { t.Errorf("producer gave up: %v", err) })
	t.Cleanup(func() {
		p.StopFetching()
		cancel()
		wg.Wait()
		if err := p.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return p
}

// settle waits until the broker's view of the consumers stops changing for
// a while and returns it.
func settle(t *testing.T, e *env, topic, sub string, parts, consumers int) []pulsartest.ConsumerStats {
	t.Helper()
	var last string
	stableSince := time.Now()
	deadline := time.Now().Add(waitLimit)
	for {
		st := e.consumerStats(topic, sub, parts)
		cur := fmt.Sprint(st)
		if cur != last || len(st) < consumers {
			last, stableSince = cur, time.Now()
		} else if time.Since(stableSince) > 300*time.Millisecond {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker view of %s never settled: %s", topic, cur)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// With the default 100/50/50 window the broker never hands a consumer more
// than the window beyond what left the stage: the client's receiver queue
// (49, the part of the window above Threshold less one) is counted against
// it, so the stage holds 51 when nothing leaves it, and the client's queue
// the rest. Each step
// lets 50 messages leave the stage; after each, the broker has handed out
// at most 100 more than that, and the client never held more than its
// queue's permits.
func TestFlowDefaultWindowAtBroker(t *testing.T) {
	e := newEnv(t)
	e.publish("flow", "m", 1000)
	out := newGatedOutput()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"flow"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	startProducer(t, src, 1, producer.Flow{}, out)

	// The client reads ahead of the stage's 51; the bounds are checked once
	// the broker's view has settled after that.
	wait.Within(t, waitLimit, "the broker to push more than the stage's 51", func() bool {
		st := e.consumerStats("flow", "sub", 0)
		return len(st) == 1 && st[0].Dispatched > 51
	})
	st := settle(t, e, "flow", "sub", 0, 1)
	if len(st) != 1 {
		t.Fatalf("want 1 consumer, got %d", len(st))
	}
	c := st[0]
	if c.Flows[0] != 49 {
		t.Fatalf("first grant %d, want the receiver queue of 49 (flows %v)", c.Flows[0], c.Flows)
	}
	checkWindow(t, c, 49, 0, 100)
	// Not vacuous: the stage took its 51 and the client read ahead of it.
	if c.Dispatched <= 51 {
		t.Fatalf("broker pushed %d messages with nothing dispatched, want more than the stage's 51", c.Dispatched)
	}

	for step := 1; step <= 6; step++ {
		out.allow(50)
		wait.Within(t, waitLimit, "the output to take its budget", func() bool { taken, _ := out.counts(); return taken == 50*step })
		st = settle(t, e, "flow", "sub", 0, 1)
		_, done := out.counts()
		checkWindow(t, st[0], 49, done, 100)
	}
}

// checkWindow asserts the broker never held more than queue permits for the
// consumer, and neither granted nor pushed more than window beyond what left
// the stage (dispatched).
func checkWindow(t *testing.T, c pulsartest.ConsumerStats, queue int64, dispatched int, window int64) {
	t.Helper()
	if c.MaxAvailable > queue {
		t.Errorf("consumer %d: broker held up to %d permits, want ≤ %d", c.ConsumerID, c.MaxAvailable, queue)
	}
	if read := c.PermitsGranted - int64(dispatched); read > window {
		t.Errorf("consumer %d: %d permits granted with %d messages dispatched from the stage: %d ahead, more than the window %d",
			c.ConsumerID, c.PermitsGranted, dispatched, read, window)
	}
	if read := c.Dispatched - int64(dispatched); read > window {
		t.Errorf("consumer %d: %d messages pushed with %d dispatched from the stage: %d ahead, more than the window %d",
			c.ConsumerID, c.Dispatched, dispatched, read, window)
	}
}

// Guarantee: a custom window keeps the broker within the window of what
// left the stage at every step. With 10/8/2 (one permit above Threshold)
// the receiver queue is 1 and the client grants one permit per message the
// source takes. With 10/9/1 there is no room above Threshold for the
// receiver queue, which still holds at least one message: it is counted
// against the window all the same.
func TestFlowCustomWindowAtBroker(t *testing.T) {
	for _, flow := range []producer.Flow{{Initial: 10, Threshold: 8, Refill: 2}, {Initial: 10, Threshold: 9, Refill: 1}} {
		t.Run(fmt.Sprintf("%d/%d/%d", flow.Initial, flow.Threshold, flow.Refill), func(t *testing.T) {
			e := newEnv(t)
			e.publish("custom", "m", 300)
			out := newGatedOutput()
			src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"custom"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
			startProducer(t, src, 1, flow, out)
			st := settle(t, e, "custom", "sub", 0, 1)
			checkWindow(t, st[0], 1, 0, 10)
			if st[0].Dispatched != 10 {
				t.Fatalf("broker pushed %d messages with nothing dispatched from the stage, want the window of 10", st[0].Dispatched)
			}
			for step := 1; step <= 10; step++ {
				out.allow(7)
				wait.Within(t, waitLimit, "the output to take its budget", func() bool { taken, _ := out.counts(); return taken == 7*step })
				st = settle(t, e, "custom", "sub", 0, 1)
				_, done := out.counts()
				checkWindow(t, st[0], 1, done, 10)
				for _, f := range st[0].Flows {
					if f != 1 {
						t.Fatalf("a grant of %d permits, want 1 (flows %v)", f, st[0].Flows)
					}
				}
			}
		})
	}
}

// With several topics and several producer stages, every consumer (one per
// topic per stage) has its own window at the broker. A partitioned topic's
// partitions share it: each partition's queue is the topic's share divided
// by the partitions (24 for 2 partitions of the default window), and with
// the stages blocked no stage is handed more than its window of a topic.
func TestFlowPerConsumerWithTopicsAndConcurrency(t *testing.T) {
	e := newEnv(t)
	if err := e.broker.CreateTopic("parted", 2); err != nil {
		t.Fatal(err)
	}
	e.publish("plain", "p", 2000)
	e.publish("parted", "q", 2000)
	out := newGatedOutput()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"plain", "parted"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	startProducer(t, src, 3, producer.Flow{}, out)
	plain := settle(t, e, "plain", "sub", 0, 3)
	parted := settle(t, e, "parted", "sub", 2, 6)
	if len(plain) != 3 || len(parted) != 6 {
		t.Fatalf("want 3 consumers on plain and 3×2 partition consumers on parted, got %d and %d", len(plain), len(parted))
	}
	names := map[string]bool{}
	for _, cs := range []struct {
		stats []pulsartest.ConsumerStats
		queue uint32
	}{{plain, 49}, {parted, 24}} {
		for _, c := range cs.stats {
			names[c.Name] = true
			if c.Flows[0] != cs.queue {
				t.Errorf("consumer %s/%d first grant %d, want its queue of %d", c.Topic, c.ConsumerID, c.Flows[0], cs.queue)
			}
			if c.MaxAvailable > int64(cs.queue) {
				t.Errorf("consumer %s/%d: broker held %d permits, want ≤ %d", c.Topic, c.ConsumerID, c.MaxAvailable, cs.queue)
			}
		}
	}
	if len(names) != 3 {
		t.Errorf("consumers named %v, want one name per producer stage", names)
	}
	perStage := map[string]int64{}
	for _, c := range plain {
		perStage["plain "+c.Name] += c.Dispatched
	}
	for _, c := range parted {
		perStage["parted "+c.Name] += c.Dispatched
	}
	for name, n := range perStage {
		if n > 100 {
			t.Errorf("%s: %d messages pushed with nothing dispatched, more than the window of 100", name, n)
		}
	}
	// Release everything: all 4000 messages come through.
	out.allow(4000)
	wait.Within(t, waitLimit, "all messages dispatched", func() bool { _, done := out.counts(); return done == 4000 })
	wait.Within(t, waitLimit, "all acked", func() bool { return e.sumAcked("plain", "sub", 0)+e.sumAcked("parted", "sub", 2) == 4000 })
}

// Guarantee: a source waiting for room in its window, with permits left
// that no refill will top up (more than Threshold), takes messages again
// when those it delivered have left the stage and been acknowledged: the
// acknowledgement wakes it, and every message published reaches the
// processors, however slowly they take them.
func TestAnAckWakesTheSourceWaitingForRoomInItsWindow(t *testing.T) {
	e := newEnv(t)
	const n = 100
	e.publish("room", "m", n)
	out := newGatedOutput()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"room"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	// A window of 20 with a Threshold of 2: the client's queue counts 10,
	// the source takes 10 and waits for room with 10 permits left, which
	// are more than Threshold: no refill comes when they leave the stage.
	startProducer(t, src, 1, producer.Flow{Initial: 20, Threshold: 2, Refill: 18}, out)
	for step := 1; step*10 <= n; step++ {
		out.allow(10)
		wait.Within(t, waitLimit, "the output to take its budget", func() bool { taken, _ := out.counts(); return taken == 10*step },
			func() string {
				taken, _ := out.counts()
				return fmt.Sprintf("%d taken, source %+v", taken, src.Stats())
			})
	}
}

// heldOutput stands for processors that acknowledge each message as soon
// as they take it, while the stage's hand-over (Publish) has not returned:
// the stage has not counted them dispatched yet. Publish returns once the
// test ends.
type heldOutput struct{ release <-chan struct{} }

func (o heldOutput) Publish(ctx context.Context, msgs []*message.Message[[]byte]) (int, error) {
	var g acker.Group
	for _, m := range msgs {
		m.AddTo(&g)
	}
	g.Flush(ctx, nil)
	select {
	case <-o.release:
	case <-ctx.Done():
	}
	return len(msgs), nil
}

// Guarantee: a source waiting for room in its window takes messages again
// when those it delivered are acknowledged, even before the stage counts
// them dispatched (the processors acknowledged them while the hand-over
// had not returned): it does not wait for a wake that never comes.
func TestAnAckBeforeTheStageCountsTheMessagesDispatchedWakesTheSource(t *testing.T) {
	e := newEnv(t)
	e.publish("early-ack", "m", 100)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // after the producer stopped: it runs later
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"early-ack"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	// As above: the source takes 10 and waits for room with 10 permits
	// left that no refill tops up. The first hand-over never returns, so
	// the stage counts nothing dispatched: only the acknowledgements of
	// its messages make room.
	startProducer(t, src, 1, producer.Flow{Initial: 20, Threshold: 2, Refill: 18}, heldOutput{release})
	wait.Within(t, waitLimit, "the source to take more than its first 10 once some are acknowledged", func() bool { return src.Stats().Received > 10 },
		func() string { return fmt.Sprintf("source %+v", src.Stats()) })
}
