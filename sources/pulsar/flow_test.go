package pulsar_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
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

// The default 100/50/50 window is what the broker sees: each consumer grants
// 100 permits when it subscribes and then refills of exactly 50, every one
// after 50 messages left the stage; the broker never holds more than 100
// permits for it, and what it was granted stays within the receiver queue,
// the client's channel and the stage window of what left the stage.
func TestFlowDefaultWindowAtBroker(t *testing.T) {
	e := newEnv(t)
	e.publish("flow", "m", 1000)
	out := newGatedOutput()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"flow"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	startProducer(t, src, 1, producer.Flow{}, out)

	// Nothing leaves the stage: the consumer holds its first window in the
	// stage and the client's queue refilled once behind it.
	st := settle(t, e, "flow", "sub", 0, 1)
	if len(st) != 1 {
		t.Fatalf("want 1 consumer, got %d", len(st))
	}
	c := st[0]
	if !slices.Equal(c.Flows, []uint32{100, 50, 50}) {
		t.Fatalf("flows before anything was dispatched: %v, want [100 50 50]", c.Flows)
	}
	checkWindow(t, c, 100, 0, readAhead(100, 100))

	// Let messages leave the stage 50 at a time: each 50 brings one refill of 50.
	for step := 1; step <= 6; step++ {
		out.allow(50)
		waitFor(t, "the output to take its budget", func() bool { taken, _ := out.counts(); return taken == 50*step })
		st = settle(t, e, "flow", "sub", 0, 1)
		c = st[0]
		_, done := out.counts()
		for i, f := range c.Flows[1:] {
			if f != 50 {
				t.Fatalf("refill %d was %d permits, want 50 (flows %v)", i+1, f, c.Flows)
			}
		}
		if c.Flows[0] != 100 {
			t.Fatalf("first grant %d, want 100", c.Flows[0])
		}
		// The stage refills 50 per 50 charged; each refill lets the source
		// take 50 more from the client, which then refills the broker.
		if want := 3 + done/50; len(c.Flows) != want {
			t.Fatalf("after %d dispatched: %d grants %v, want %d", done, len(c.Flows), c.Flows, want)
		}
		checkWindow(t, c, 100, done, readAhead(100, 100))
	}
}

// readAhead is the most a consumer can have been granted at the broker
// beyond what left the stage: the client's receiver queue (queue), the
// channel through which the client hands messages to the source (10), and
// the stage feed's window (window).
func readAhead(queue, window int) int64 { return int64(queue + 10 + window) }

// checkWindow asserts the broker never held more than queue permits for the
// consumer and granted no more than bound beyond what left the stage.
func checkWindow(t *testing.T, c pulsartest.ConsumerStats, queue int64, dispatched int, bound int64) {
	t.Helper()
	if c.MaxAvailable > queue {
		t.Errorf("consumer %d: broker held up to %d permits, want ≤ %d", c.ConsumerID, c.MaxAvailable, queue)
	}
	if read := c.PermitsGranted - int64(dispatched); read > bound {
		t.Errorf("consumer %d: %d permits granted with %d messages dispatched from the stage: read-ahead %d > %d",
			c.ConsumerID, c.PermitsGranted, dispatched, read, bound)
	}
}

// A custom window (10/3/4, max window 10) keeps its first grant of 10 at the
// broker; the client refills half its queue (5) at a time and the stage feed
// bounds what the source takes from it, so read-ahead stays within queue +
// channel + max window of what left the stage.
func TestFlowCustomWindowAtBroker(t *testing.T) {
	e := newEnv(t)
	e.publish("custom", "m", 300)
	out := newGatedOutput()
	flow := producer.Flow{Initial: 10, Threshold: 3, Refill: 4}
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"custom"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	startProducer(t, src, 1, flow, out)
	st := settle(t, e, "custom", "sub", 0, 1)
	c := st[0]
	if c.Flows[0] != 10 {
		t.Fatalf("first grant %d, want Initial = 10 (flows %v)", c.Flows[0], c.Flows)
	}
	checkWindow(t, c, 10, 0, readAhead(10, 10))
	if c.Dispatched > readAhead(10, 10) {
		t.Fatalf("broker pushed %d messages with nothing dispatched from the stage, want ≤ %d", c.Dispatched, readAhead(10, 10))
	}
	for step := 1; step <= 10; step++ {
		out.allow(7)
		waitFor(t, "the output to take its budget", func() bool { taken, _ := out.counts(); return taken == 7*step })
		st = settle(t, e, "custom", "sub", 0, 1)
		_, done := out.counts()
		checkWindow(t, st[0], 10, done, readAhead(10, 10))
		for _, f := range st[0].Flows[1:] {
			if f > 5 {
				t.Fatalf("refill of %d permits, want ≤ 5 (flows %v)", f, st[0].Flows)
			}
		}
	}
}

// With several topics and several producer stages, every consumer (one per
// topic per stage) has its own window at the broker: 100 granted first,
// never more than 100 held, nothing beyond its stage window taken while the
// stages are blocked.
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
	for _, c := range append(plain, parted...) {
		names[c.Name] = true
		if c.Flows[0] != 100 {
			t.Errorf("consumer %s/%d first grant %d, want 100", c.Topic, c.ConsumerID, c.Flows[0])
		}
		for _, f := range c.Flows[1:] {
			if f != 50 {
				t.Errorf("consumer %s/%d refill %d, want 50 (%v)", c.Topic, c.ConsumerID, f, c.Flows)
			}
		}
		if c.MaxAvailable > 100 {
			t.Errorf("consumer %s/%d: broker held %d permits, want ≤ 100", c.Topic, c.ConsumerID, c.MaxAvailable)
		}
	}
	if len(names) != 3 {
		t.Errorf("consumers named %v, want one name per producer stage", names)
	}
	// Per stage and topic: at most the stage window (100) taken from the
	// client plus the client's queue of 100 per partition consumer.
	for _, cs := range [][]pulsartest.ConsumerStats{plain} {
		for _, c := range cs {
			if c.Dispatched > readAhead(100, 100) {
				t.Errorf("consumer %d got %d messages with nothing dispatched, want ≤ %d", c.ConsumerID, c.Dispatched, readAhead(100, 100))
			}
		}
	}
	perStage := map[string]int64{}
	for _, c := range parted {
		perStage[c.Name] += c.Dispatched
	}
	for name, n := range perStage {
		// Two partition consumers, each with its own client queue, share
		// one channel and one stage feed.
		if bound := readAhead(2*100, 100); n > bound {
			t.Errorf("stage %s got %d messages of the 2-partition topic with nothing dispatched, want ≤ %d", name, n, bound)
		}
	}
	// Release everything: all 4000 messages come through.
	out.allow(4000)
	waitFor(t, "all messages dispatched", func() bool { _, done := out.counts(); return done == 4000 })
	waitFor(t, "all acked", func() bool { return e.sumAcked("plain", "sub", 0)+e.sumAcked("parted", "sub", 2) == 4000 })
}
