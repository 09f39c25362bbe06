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
// on the broker, only the producers the backend had and the one the
// Declare of new topics was creating (kept for the backend's next sends),
// and none of the calls' goroutines is left but that producer's, while
// the backend stays open.
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
	// The Declare of new topics was creating the producer of its main topic
	// when it gave up: the backend keeps it.
	producers++
	wait.For(t, "the late calls to close what they made", func() bool {
		st := br.Stats()
		return st.ConsumersOpen == 0 && st.ProducersOpen == producers && st.Withheld == 0
	}, func() string { return fmt.Sprintf("%s (want %d producers)", left(br), producers) })
	b.DropProducers() // and with them, the kept producer's goroutines
	var leaked error
	wait.For(t, "the late calls' goroutines to end", func() bool {
		leaked = goleak.Find(before, reconnectNotice, producerStarting)
		return leaked == nil
	}, func() string { return fmt.Sprintf("goroutines: %v", leaked) })
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

// send is one of the sends of a topology's queues.
type send struct {
	what string
	do   func(context.Context) error
}

// sends are the four sends of q, each of a letter for one topic of a
// topology with a hold queue and a DLQ. An error of a send that does not
// wrap ErrSend is replaced by one that says so and wraps nothing, so that
// the caller's check of the error fails (the send may return after its
// test has ended, when it cannot fail the test itself).
func sends(q topology.Queues[string]) []send {
	death := &topology.Death{Reason: topology.ReasonRejected, Topic: q.Topology().Name()}
	ss := []send{
		{"Publish", func(ctx context.Context) error { return q.Publish(ctx, topology.Letter[string]{Value: "p"}) }},
		{"Hold", func(ctx context.Context) error { return q.Hold(ctx, 0, topology.Letter[string]{Value: "h"}) }},
		{"Requeue", func(ctx context.Context) error { return q.Requeue(ctx, topology.Letter[string]{Value: "r"}) }},
		{"DeadLetter", func(ctx context.Context) error {
			return q.DeadLetter(ctx, topology.Letter[string]{Value: "d", Death: death})
		}},
	}
	for i := range ss {
		s := ss[i]
		ss[i].do = func(ctx context.Context) error {
			err := s.do(ctx)
			if err != nil && !errors.Is(err, pulsartopology.ErrSend) {
				return fmt.Errorf("%v, which does not wrap ErrSend", err)
			}
			return err
		}
	}
	return ss
}

// Guarantee: while the broker leaves the creation of a topic's producer
// unanswered, Publish, Hold, Requeue and DeadLetter on a topic the backend
// has no producer for each return by their context's deadline (1s, far
// below the client's operation timeout, a minute here) with an error
// wrapping it and ErrSend. Once the broker answers, the backend keeps the
// producers created after their senders gave up, one per topic: later
// sends use them, with the broker still leaving new producers unanswered.
func TestSendsReturnByTheirDeadlineWhileTheirProducerIsCreated(t *testing.T) {
	br := testbroker.Pulsar(t)
	b := patientBackend(t, br)
	q := declareHeld(t, b, "creating")
	b.DropProducers()
	if n := br.Stats().ProducersOpen; n != 0 {
		t.Fatalf("%d producers open once dropped, want 0", n)
	}
	release := br.Withhold(pulsartest.CommandProducer)
	t.Cleanup(release)
	calls := sends(q)
	for _, c := range calls {
		if !testbroker.ReturnsByDeadline(t, c.what, c.do) {
			t.FailNow()
		}
	}
	if n := br.Stats().Withheld; n == 0 {
		t.Fatal("the broker withheld nothing: the sends did not wait for it")
	}
	release()
	const topics = 3 // the main topic, the hold topic, the DLQ
	wait.For(t, "the late producers to be created", func() bool {
		st := br.Stats()
		return st.ProducersOpen == topics && st.Withheld == 0
	}, func() string { return fmt.Sprintf("%s (want %d producers)", left(br), topics) })
	t.Cleanup(br.Withhold(pulsartest.CommandProducer))
	for _, c := range calls {
		if err := c.do(ctxT(t)); err != nil {
			t.Errorf("%s once its topic's producer was created late: %v", c.what, err)
		}
	}
	if n := br.Stats().ProducersOpen; n != topics {
		t.Errorf("%d producers open after the sends, want %d", n, topics)
	}
}

// Guarantee: a send whose producer's creation the broker leaves
// unanswered returns by its context's deadline, and so does the
// backend's Close then (the creation goes on); once the broker answers,
// the producer created after the backend closed is closed: a later Close
// returns nil with no producer left open on the broker.
func TestAProducerCreatedOnceTheBackendClosedIsClosed(t *testing.T) {
	br := testbroker.Pulsar(t)
	b := patientBackend(t, br)
	q := declareHeld(t, b, "late")
	b.DropProducers()
	release := br.Withhold(pulsartest.CommandProducer)
	t.Cleanup(release)
	if !testbroker.ReturnsByDeadline(t, "Publish", sends(q)[0].do) {
		t.FailNow()
	}
	if n := br.Stats().Withheld; n != 1 {
		t.Fatalf("%d commands withheld after the Publish gave up, want its producer's creation", n)
	}
	if !testbroker.ReturnsByDeadline(t, "Close", b.Close) {
		t.FailNow()
	}
	release()
	if err := b.Close(ctxT(t)); err != nil {
		t.Fatalf("closing again once the broker answered: %v", err)
	}
	if st := br.Stats(); st.ConsumersOpen != 0 || st.ProducersOpen != 0 || st.Withheld != 0 {
		t.Errorf("after Close: %s, want none", left(br))
	}
}

// Guarantee: while the broker leaves the messages sent to it unanswered,
// Publish, Hold, Requeue and DeadLetter each return by their context's
// deadline (1s, far below Options.OperationTimeout, 20s here) with an
// error wrapping it and ErrSend.
func TestSendsReturnByTheirDeadlineWhileTheBrokerWithholdsTheirReceipt(t *testing.T) {
	br := testbroker.Pulsar(t)
	b := patientBackend(t, br)
	q := declareHeld(t, b, "receipt")
	release := br.Withhold(pulsartest.CommandSend)
	t.Cleanup(release)
	for _, c := range sends(q) {
		if !testbroker.ReturnsByDeadline(t, c.what, c.do) {
			t.FailNow()
		}
	}
	if n := br.Stats().Withheld; n == 0 {
		t.Fatal("the broker withheld nothing: the sends did not wait for it")
	}
}

// declareHeld declares on b a topic name with a hold queue (1s) and a DLQ,
// and returns its queues.
func declareHeld(t *testing.T, b *pulsartopology.Backend[string], name string) topology.Queues[string] {
	t.Helper()
	q, err := b.Declare(ctxT(t), build(t, topology.New(name).Hold(time.Second).DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// Guarantee: while the broker leaves a dead-letter reader's marker
// unanswered (TryReceive catching up with the DLQ), the reader's Close
// returns by its context's deadline with an error wrapping it, and the
// TryReceive returns ErrClosed soon after, without waiting for the
// broker's receipt up to Options.OperationTimeout (20s here).
func TestReaderCloseEndsATryReceiveWhoseMarkerTheBrokerWithholds(t *testing.T) {
	br := testbroker.Pulsar(t)
	b := patientBackend(t, br)
	q := declareHeld(t, b, "marker")
	r, err := q.SubscribeDead(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	release := br.Withhold(pulsartest.CommandSend)
	t.Cleanup(release)
	tried := make(chan error, 1)
	go func() {
		_, err := r.TryReceive(t.Context(), make([]topology.Letter[string], 1))
		tried <- err
	}()
	wait.For(t, "the marker to be withheld", func() bool { return br.Stats().Withheld == 1 }, func() string { return left(br) })
	if !testbroker.ReturnsByDeadline(t, "the reader's Close", r.Close) {
		t.FailNow()
	}
	select {
	case err := <-tried:
		if !errors.Is(err, topology.ErrClosed) {
			t.Errorf("TryReceive when its reader closed = %v, want ErrClosed", err)
		}
	case <-time.After(testbroker.HungGrace):
		t.Fatalf("TryReceive still waits for its marker's receipt %v after its reader closed", testbroker.HungGrace)
	}
}

// Guarantee: while the broker leaves a dead-letter reader's marker
// unanswered (the DLQ reader's TryReceive catching up with the DLQ),
// Replay returns by its context's deadline (1s, far below
// Options.OperationTimeout, 20s here) with an error wrapping it and
// ErrSend: its TryReceive waits for the marker's receipt within Replay's
// context, not only within the backend's own bound.
func TestReplayReturnsByItsDeadlineWhileTheBrokerWithholdsItsMarker(t *testing.T) {
	br := testbroker.Pulsar(t)
	b := patientBackend(t, br)
	q := declareHeld(t, b, "replay-marker")
	release := br.Withhold(pulsartest.CommandSend)
	t.Cleanup(release)
	if !testbroker.ReturnsByDeadline(t, "Replay", func(ctx context.Context) error {
		rep, err := topology.Replay(ctx, q, topology.ReplayOptions[string]{})
		if err != nil && !errors.Is(err, pulsartopology.ErrSend) {
			t.Errorf("Replay with its marker withheld = %v, want an error wrapping ErrSend", err)
		}
		if len(rep.Replayed) != 0 || rep.Kept != 0 {
			t.Errorf("Replay of an empty DLQ reported %d replayed and %d kept", len(rep.Replayed), rep.Kept)
		}
		return err
	}) {
		t.FailNow()
	}
	if n := br.Stats().Withheld; n == 0 {
		t.Fatal("the broker withheld nothing: Replay's TryReceive did not wait for it")
	}
}

// Guarantee: Declare with a context already cancelled returns an error
// wrapping ErrDeclare and context.Canceled.
func TestDeclareWithACancelledContextFailsWithItsError(t *testing.T) {
	be := newBackend(t, options(testbroker.Pulsar(t), topic.Codec[string](topic.StringCodec{})))
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	_, err := be.Declare(ctx, build(t, topology.New("cancelled").ForConsumerGroup("g")))
	if !errors.Is(err, pulsartopology.ErrDeclare) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Declare = %v, want an error wrapping ErrDeclare and context.Canceled", err)
	}
}
