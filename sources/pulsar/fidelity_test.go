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

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// On a failover subscription a failed message is nacked, and the broker,
// as a real one does, rewinds the subscription: the failed message and
// every other unacknowledged one come back, with a redelivery count of 0.
// Nothing is lost and the failed message is handled again.
func TestFailoverNackRedeliversEverythingInFlight(t *testing.T) {
	e := newEnv(t)
	want := e.publish("failover-nack", "m", 200)
	var (
		mu       sync.Mutex
		attempts = map[string]int{}
		counted  int
	)
	co := earliest()
	co.NackRedeliveryDelay = 50 * time.Millisecond
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"failover-nack"}, Subscription: "sub",
		SubscriptionType: bpulsar.Failover, Consumer: co})
	_, stop := run(t, src, 2, producer.Flow{Initial: 20}, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		md, _ := message.MetadataAs[*bpulsar.Metadata](m)
		mu.Lock()
		defer mu.Unlock()
		attempts[string(m.Data)]++
		if md.RedeliveryCount > 0 {
			counted++
		}
		if string(m.Data) == "m-50" && attempts["m-50"] == 1 {
			return nil, errors.New("transient")
		}
		return m.Data, nil
	})
	wait.Within(t, waitLimit, "every message acked", func() bool { return e.sumAcked("failover-nack", "sub", 0) == int64(len(want)) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, w := range want {
		if attempts[w] == 0 {
			t.Fatalf("%s never handled", w)
		}
	}
	if attempts["m-50"] < 2 {
		t.Errorf("the failed message was handled %d times, want it back", attempts["m-50"])
	}
	if counted != 0 {
		t.Errorf("%d deliveries carried a redelivery count; a failover subscription keeps none", counted)
	}
	var redelivered int64
	for _, c := range e.broker.Consumers("failover-nack", "sub") {
		redelivered += c.Redelivered
	}
	if redelivered < 1 {
		t.Errorf("the broker redelivered nothing after the nack")
	}
}

// When the broker unloads a topic it closes the consumers from its side
// (CLOSE_CONSUMER); pulsar-client-go reconnects them, the stage keeps
// running and every message is handled and acked: nothing is lost.
func TestUnloadNothingLost(t *testing.T) {
	e := newEnv(t)
	if err := e.broker.CreateTopic("unload", 2); err != nil {
		t.Fatal(err)
	}
	want := e.publish("unload", "m", 600)
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"unload"}, Subscription: "sub", Consumer: earliest()})
	p, stop := run(t, src, 2, producer.Flow{Initial: 10}, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		r.add(m)
		time.Sleep(100 * time.Microsecond) // keep messages in flight across the unload
		return m.Data, nil
	})
	wait.Within(t, waitLimit, "some messages handled", func() bool { return r.distinct() >= 100 })
	// Both stages hold their consumers: what the unload meets is four
	// subscribed partition consumers to reconnect. (One stage can handle
	// the first messages while the other still subscribes; an unload then
	// closes fewer consumers, or fails that subscribe.)
	wait.Within(t, waitLimit, "2 stages × 2 partitions subscribed", func() bool {
		return e.connectedCount("unload", "sub", 2) == 4 && src.Stats().Consumers == 2
	})
	if err := e.broker.Unload("unload"); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(want) })
	wait.Within(t, waitLimit, "the backlog to empty", func() bool {
		return e.broker.Backlog(pulsartest.PartitionTopic("unload", 0), "sub")+e.broker.Backlog(pulsartest.PartitionTopic("unload", 1), "sub") == 0
	})
	if err := p.Err(); err != nil {
		t.Errorf("pipeline error after the unload: %v", err)
	}
	// Each stage's consumer of each partition was closed by the broker and
	// reconnected by the client.
	wait.Within(t, waitLimit, "2 stages × 2 partitions reconnected", func() bool {
		connected, closed := 0, 0
		for _, c := range e.consumerStats("unload", "sub", 2) {
			if c.Connected {
				connected++
			} else {
				closed++
			}
		}
		return connected == 4 && closed == 4
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A broker that sends whole reads of batches past the permits (as a real
// one does on an Exclusive subscription: min(permits, 100) entries, here 12
// batches of 30 for the receiver queue's 12 permits) does not disturb the
// source: every message is handled once and acked, though the broker had
// dispatched far more than the client granted while the first were still
// being handled.
func TestBatchedOvershootHandledOnce(t *testing.T) {
	e := newEnv(t)
	for i := range 20 {
		msgs := make([]pulsartest.Message, 30)
		for j := range msgs {
			msgs[j] = pulsartest.Message{Payload: fmt.Appendf(nil, "b%d-%d", i, j)}
		}
		if _, err := e.broker.PublishBatch(context.Background(), "overshoot", msgs...); err != nil {
			t.Fatal(err)
		}
	}
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"overshoot"}, Subscription: "sub",
		SubscriptionType: bpulsar.Exclusive, Consumer: earliest()})
	_, stop := run(t, src, 1, producer.Flow{}, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		<-release
		r.add(m)
		return m.Data, nil
	})
	wait.Within(t, waitLimit, "the broker to overshoot the permits", func() bool {
		cs := e.broker.Consumers("overshoot", "sub")
		return len(cs) == 1 && cs[0].Dispatched >= 360 && cs[0].Dispatched > cs[0].PermitsGranted
	})
	once.Do(func() { close(release) })
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == 600 })
	wait.Within(t, waitLimit, "the backlog to empty", func() bool { return e.broker.Backlog("overshoot", "sub") == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	counts, _ := r.snapshot()
	for k, n := range counts {
		if n != 1 {
			t.Fatalf("%s handled %d times, want once", k, n)
		}
	}
}

// With a real broker's timing (the first active-consumer notice sent while
// the consumer subscribes) the source reports the active consumer active
// and the standby inactive, each once, and the standby active when it
// takes over.
func TestFailoverCallbackWithRealNoticeTiming(t *testing.T) {
	e := newEnv(t)
	e.publish("fo", "x", 1)
	var first, second stateLog
	r1, r2 := newReceived(), newReceived()
	named := func(name string, src *bpulsar.Source, r *received) pipeline.Options[[]byte, []byte] {
		return pipeline.Options[[]byte, []byte]{Name: name, ShutdownTimeout: 10 * time.Second,
			Producer:   producer.Options[[]byte]{Source: src},
			Processors: processor.Options[[]byte, []byte]{Handle: recordAll(r)}}
	}
	// For the topic "fo" the broker's hash ring makes fo-first's consumer
	// ("fo-first.producer.0-t") the active one.
	src1 := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"fo"}, Subscription: "sub", NameSuffix: "t",
		SubscriptionType: bpulsar.Failover, ActiveStateCallback: first.add, Consumer: earliest()})
	_, stop1 := start(t, named("fo-first", src1, r1))
	wait.Within(t, waitLimit, "the first consumer to be reported active", func() bool { s, ok := first.last(); return ok && s.Active })
	src2 := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"fo"}, Subscription: "sub", NameSuffix: "t",
		SubscriptionType: bpulsar.Failover, ActiveStateCallback: second.add, Consumer: earliest()})
	_, stop2 := start(t, named("fo-second", src2, r2))
	wait.Within(t, waitLimit, "the standby to subscribe", func() bool { return len(e.broker.Consumers("fo", "sub")) == 2 })
	e.publish("fo", "while-first", 5)
	wait.Within(t, waitLimit, "the active consumer to handle the messages", func() bool { return r1.distinct() == 6 })
	wait.Within(t, waitLimit, "the standby to be reported inactive", func() bool { s, ok := second.last(); return ok && !s.Active })
	if n := first.len(); n != 1 {
		t.Fatalf("the active consumer was reported %d times, want once", n)
	}
	if n := second.len(); n != 1 {
		t.Fatalf("the standby was reported %d times before anything changed, want once", n)
	}
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, waitLimit, "the standby to be reported active", func() bool { s, ok := second.last(); return ok && s.Active })
	e.publish("fo", "after", 5)
	wait.Within(t, waitLimit, "the new active consumer to handle the messages", func() bool { return r2.distinct() >= 5 })
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
}

// DLQ on Shared with a stage restart: a broker forgets redelivery counts
// when the last consumer of the subscription leaves, and a one-stage
// pipeline's restart is exactly that, so a poison message needs
// MaxDeliveries deliveries after the restart before pulsar-client-go moves
// it to the dead letter topic; nothing else is affected.
func TestDeadLetterCountsRestartWithTheStage(t *testing.T) {
	e := newEnv(t)
	e.publish("restart-dlq", "m", 3)
	var (
		mu     sync.Mutex
		counts []uint32 // redelivery counts m-1 was seen with
	)
	handle := func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		if string(m.Data) != "m-1" {
			return m.Data, nil
		}
		md, _ := message.MetadataAs[*bpulsar.Metadata](m)
		mu.Lock()
		counts = append(counts, md.RedeliveryCount)
		mu.Unlock()
		return nil, errors.New("always fails")
	}
	seen := func() int { mu.Lock(); defer mu.Unlock(); return len(counts) }
	co := earliest()
	co.NackRedeliveryDelay = 50 * time.Millisecond
	co.DLQ = &pulsar.DLQPolicy{MaxDeliveries: 3, DeadLetterTopic: "restart-dlq-dead", InitialSubscriptionName: "dead",
		ProducerOptions: pulsar.ProducerOptions{SendTimeout: -1}}
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"restart-dlq"}, Subscription: "sub", Consumer: co})
	start(t, pipeline.Options[[]byte, []byte]{
		Name:       "restart-dlq",
		Producer:   producer.Options[[]byte]{Source: src, Restart: producer.Restart{Backoff: 20 * time.Millisecond}},
		Processors: processor.Options[[]byte, []byte]{Handle: handle},
	})
	wait.Within(t, waitLimit, "the poison message delivered twice", func() bool { return seen() >= 2 })
	if !src.CloseConsumerForTest() {
		t.Fatal("no open consumer to close")
	}
	wait.Within(t, waitLimit, "the poison message in the dead letter topic", func() bool { return len(e.broker.Messages("restart-dlq-dead")) == 1 })
	wait.Within(t, waitLimit, "the backlog to empty", func() bool { return e.broker.Backlog("restart-dlq", "sub") == 0 })
	mu.Lock()
	defer mu.Unlock()
	// Before the restart 0, 1 (maybe 2, if the second nack's redelivery
	// came first); after it the count starts again at 0 and reaches 2.
	restarted := -1
	for i := 1; i < len(counts); i++ {
		if counts[i] < counts[i-1] {
			restarted = i
		}
	}
	if restarted < 0 || counts[restarted] != 0 || len(counts)-restarted != 3 {
		t.Fatalf("redelivery counts %v: want them to start again at 0 after the restart and the message to reach the dead letter topic after 3 more deliveries", counts)
	}
}

// doubling is a nack backoff policy that doubles from 300ms.
type doubling struct{}

func (doubling) Next(redeliveries uint32) time.Duration {
	return 300 * time.Millisecond << min(redeliveries, 5)
}

// Guarantee: ConsumerOptions.NackBackoffPolicy applies to the messages the
// source nacks: a message that keeps failing comes back later each time,
// as the policy says for its redelivery count.
func TestNackBackoffPolicyApplies(t *testing.T) {
	e := newEnv(t)
	e.publish("backoff", "m", 1)
	var (
		mu    sync.Mutex
		times []time.Time
	)
	co := earliest()
	co.NackBackoffPolicy = doubling{}
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"backoff"}, Subscription: "sub", Consumer: co})
	_, stop := run(t, src, 1, producer.Flow{}, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		return nil, errors.New("poison")
	})
	wait.Within(t, waitLimit, "five deliveries", func() bool { mu.Lock(); defer mu.Unlock(); return len(times) >= 5 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// The fifth delivery follows the nack of redelivery 3: 2.4 s by the
	// policy (less the client's 256 ms timer precision).
	if gap := times[4].Sub(times[3]); gap < 1500*time.Millisecond {
		t.Fatalf("redelivery 4 came %v after redelivery 3; the policy says 2.4 s (gaps: %v %v %v %v)", gap.Round(time.Millisecond),
			times[1].Sub(times[0]).Round(time.Millisecond), times[2].Sub(times[1]).Round(time.Millisecond),
			times[3].Sub(times[2]).Round(time.Millisecond), gap.Round(time.Millisecond))
	}
}

// userInterceptor counts what the client reports to an application's own
// consumer interceptor.
type userInterceptor struct {
	consumed atomic.Int64
	closed   atomic.Int64
}

func (u *userInterceptor) BeforeConsume(pulsar.ConsumerMessage) { u.consumed.Add(1) }

func (*userInterceptor) OnAcknowledge(pulsar.Consumer, pulsar.MessageID) {}

func (*userInterceptor) OnNegativeAcksSend(pulsar.Consumer, []pulsar.MessageID) {}

func (u *userInterceptor) OnConsumerClose(pulsar.Consumer, error) { u.closed.Add(1) }

// The application's consumer interceptors keep working beside the
// source's own: they see every message, and the closure of the consumer
// when the pipeline stops.
func TestApplicationInterceptorsAreKept(t *testing.T) {
	e := newEnv(t)
	want := e.publish("intercepted", "m", 100)
	u := &userInterceptor{}
	co := earliest()
	co.Interceptors = pulsar.ConsumerInterceptors{u}
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"intercepted"}, Subscription: "sub", Consumer: co})
	_, stop := run(t, src, 1, producer.Flow{}, recordAll(r))
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(want) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := u.consumed.Load(); n != int64(len(want)) {
		t.Errorf("the application's interceptor saw %d messages, want %d", n, len(want))
	}
	if n := u.closed.Load(); n != 1 {
		t.Errorf("the application's interceptor saw %d closures, want 1", n)
	}
}
