package pulsartopology_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// patientBackend returns a backend on br, closed at t's cleanup, whose
// client waits a minute for each of the broker's answers and keeps a
// connection the broker stopped reading open that long: a call that waits
// for the client rather than its context outlives
// testbroker.ReturnsByDeadline's grace.
func patientBackend(t *testing.T, br *pulsartest.Broker) *pulsartopology.Backend[string] {
	t.Helper()
	o := options(br, topic.Codec[string](topic.StringCodec{}))
	o.ClientOptions.OperationTimeout = time.Minute
	o.ClientOptions.KeepAliveInterval = time.Minute
	return newBackend(t, o)
}

// producerStarting ignores a producer's reconnection loop, which
// pulsar-client-go (v0.21.0; producer_partition.go, runEventsLoop) starts
// from the producer's events loop once that runs: for a producer created
// just before goleak.IgnoreCurrent, it may start after. A producer left
// open still shows by its events loop.
var producerStarting = goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionProducer).runEventsLoop.func1")

// left describes what is open on br, for a failure message.
func left(br *pulsartest.Broker) string {
	st := br.Stats()
	return fmt.Sprintf("%d consumers and %d producers open, %d commands withheld", st.ConsumersOpen, st.ProducersOpen, st.Withheld)
}

// Guarantee: while the broker leaves the creation of producers and
// subscriptions unanswered, Declare (of new topics, and again of declared
// ones), a group reader's and a broadcast reader's Subscribe and
// SubscribeDead each return by their context's deadline (1s, far below
// the client's operation timeout, a minute here) with an error wrapping
// it and ErrDeclare or ErrSubscribe. Once the broker answers, each call
// closes what it made after its caller gave up: no consumer is left open
// on the broker, only the producers the backend had, and none of the
// calls' goroutines is left, while the backend stays open.
func TestDeclareAndSubscribeReturnByTheirDeadlineWhenTheBrokerHangs(t *testing.T) {
	br := testbroker.Pulsar(t)
	b := patientBackend(t, br)
	hung := build(t, topology.New("hung").Hold(time.Second).DLQ())
	q, err := b.Declare(ctxT(t), hung)
	if err != nil {
		t.Fatal(err)
	}
	bq, err := b.Declare(ctxT(t), build(t, topology.New("hung-all").Broadcast()))
	if err != nil {
		t.Fatal(err)
	}
	fresh := build(t, topology.New("hung-new").Hold(time.Second).DLQ())
	producers := br.Stats().ProducersOpen // the backend's: one per topic declared
	if n := br.Stats().ConsumersOpen; n != 0 {
		t.Fatalf("%d consumers open after Declare, want 0", n)
	}
	// The subscriptions the late calls subscribe to, and how many consumers
	// each had so far.
	dlq, _ := hung.DLQ()
	subs := map[[2]string]int{
		{b.TopicName(hung.Name()), hung.ConsumerGroup()}:          0,
		{b.TopicName(hung.Holds()[0].Name), hung.ConsumerGroup()}: 0,
		{b.TopicName(dlq), pulsartopology.DeadSubscription}:       0,
	}
	for s := range subs {
		subs[s] = len(br.Consumers(s[0], s[1]))
	}
	before := goleak.IgnoreCurrent()
	release := br.Withhold(pulsartest.CommandProducer, pulsartest.CommandSubscribe)
	t.Cleanup(release) // after a failed check too, nothing waits for the test's end
	declaring := func(top *topology.Topology) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := b.Declare(ctx, top)
			if err != nil && !errors.Is(err, pulsartopology.ErrDeclare) {
				t.Errorf("Declare of %q = %v, want an error wrapping ErrDeclare", top.Name(), err)
			}
			return err
		}
	}
	subscribing := func(sub func(context.Context) (topology.Reader[string], error)) func(context.Context) error {
		return func(ctx context.Context) error {
			r, err := sub(ctx)
			if err == nil {
				t.Errorf("a Subscribe with the broker hung made a reader")
				_ = r.Close(ctx)
			} else if !errors.Is(err, pulsartopology.ErrSubscribe) {
				t.Errorf("a Subscribe with the broker hung = %v, want an error wrapping ErrSubscribe", err)
			}
			return err
		}
	}
	for _, call := range []struct {
		what string
		do   func(context.Context) error
	}{
		{"Declare of new topics", declaring(fresh)},
		{"Declare of declared topics", declaring(hung)},
		{"a group reader's Subscribe", subscribing(q.Subscribe)},
		{"a broadcast reader's Subscribe", subscribing(bq.Subscribe)},
		{"SubscribeDead", subscribing(q.SubscribeDead)},
	} {
		if !testbroker.ReturnsByDeadline(t, call.what, call.do) {
			t.FailNow()
		}
	}
	if n := br.Stats().Withheld; n == 0 {
		t.Fatal("the broker withheld nothing: the calls did not wait for it")
	}
	release()
	var leaked error
	wait.For(t, "the late calls to close what they made", func() bool {
		st := br.Stats()
		if st.ConsumersOpen != 0 || st.ProducersOpen != producers || st.Withheld != 0 {
			return false
		}
		leaked = goleak.Find(before, reconnectNotice, producerStarting)
		return leaked == nil
	}, func() string {
		return fmt.Sprintf("%s (want %d producers); goroutines: %v", left(br), producers, leaked)
	})
	for s, n := range subs {
		if cs := br.Consumers(s[0], s[1]); len(cs) <= n {
			t.Errorf("subscription %q on %s: no consumer subscribed once the broker answered", s[1], s[0])
		}
	}
}

// Guarantee: while a Declare waits for the broker to create a producer,
// the backend's Close returns by its context's deadline with an error
// wrapping it (the creation holds nothing Close waits for). Once the
// broker answers, the Declare returns ErrClosed, having closed the
// producer it made, and a later Close returns nil with no consumer or
// producer of the backend left open on the broker.
func TestCloseReturnsByItsDeadlineWhileADeclareWaitsForTheBroker(t *testing.T) {
	br := testbroker.Pulsar(t)
	b := patientBackend(t, br)
	release := br.Withhold(pulsartest.CommandProducer)
	t.Cleanup(release)
	declared := make(chan error, 1)
	go func() {
		_, err := b.Declare(ctxT(t), build(t, topology.New("closing").Hold(time.Second).DLQ()))
		declared <- err
	}()
	wait.For(t, "the producer's creation to be withheld", func() bool { return br.Stats().Withheld == 1 })
	if !testbroker.ReturnsByDeadline(t, "Close", b.Close) {
		t.FailNow()
	}
	release()
	select {
	case err := <-declared:
		if !errors.Is(err, topology.ErrClosed) {
			t.Errorf("the Declare under way when the backend closed = %v, want ErrClosed", err)
		}
	case <-time.After(patience):
		t.Fatalf("the Declare still waits %v after the broker answered", patience)
	}
	if err := b.Close(ctxT(t)); err != nil {
		t.Fatalf("closing again once the broker answered: %v", err)
	}
	if st := br.Stats(); st.ConsumersOpen != 0 || st.ProducersOpen != 0 {
		t.Errorf("after Close: %s, want none", left(br))
	}
}
