package pulsartopology_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// faultPatience bounds the fault tests' waits for what must happen.
const faultPatience = testbroker.PulsarFaultPatience

// faultHold is the hold of the fault tests' topologies.
const faultHold = time.Second

// faultBackend starts a backend on br whose letters whose hand-off
// failed come back after 100ms, closed when the test ends.
func faultBackend(t *testing.T, br *pulsartest.Broker) *pulsartopology.Backend[int] {
	t.Helper()
	o := options(br, topic.Codec[int](topic.IntCodec{}))
	o.RedeliveryDelay = 100 * time.Millisecond
	return newBackend(t, o)
}

// faultTopology declares name with a hold of faultHold and a DLQ on be.
func faultTopology(t *testing.T, be *pulsartopology.Backend[int], name string) topology.Queues[int] {
	t.Helper()
	q, err := be.Declare(ctxT(t), build(t, topology.New(name).Hold(faultHold).DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// reader subscribes a reader of q's group, closed when the test ends.
func reader(t *testing.T, q topology.Queues[int]) topology.Reader[int] {
	t.Helper()
	r, err := q.Subscribe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "a reader", r.Close) })
	return r
}

// receiveLetter waits for one letter of r.
func receiveLetter(t *testing.T, r topology.Reader[int]) topology.Letter[int] {
	t.Helper()
	buf := make([]topology.Letter[int], 1)
	if _, err := r.Receive(ctxT(t), buf); err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return buf[0]
}

// take receives k letters of r and settles them (counted in led), but
// those hold (if not nil) is true for, given the letter's rank and value,
// which it returns unsettled.
func take(t *testing.T, r topology.Reader[int], led *testbroker.Ledger, k int, hold func(i, v int) bool) []topology.Letter[int] {
	t.Helper()
	var held []topology.Letter[int]
	for i := range k {
		l := receiveLetter(t, r)
		if hold != nil && hold(i, l.Value) {
			held = append(held, l)
			continue
		}
		if err := r.Settle(ctxT(t), &l); err != nil {
			t.Fatalf("Settle(%d): %v", l.Value, err)
		}
		led.Handle(l.Value)
	}
	return held
}

// lastFive holds the last five of k letters.
func lastFive(k int) func(i, v int) bool { return func(i, _ int) bool { return i >= k-5 } }

// publishLetters publishes 0..n-1 to q, each as a letter of its value,
// into led, failing t unless every publish returns nil.
func publishLetters(t *testing.T, q topology.Queues[int], led *testbroker.Ledger, n int) {
	t.Helper()
	testbroker.PublishRange(led, 0, n, func(v int) error { return q.Publish(ctxT(t), topology.Letter[int]{Value: v}) }, nil)
	if p, _ := led.Counts(); p != n {
		t.Fatalf("%d of %d publishes returned nil", p, n)
	}
}

// handling receives from each of rs until the test's cleanup, passing
// each letter to handle and settling it; a letter handle returns true
// for (nil handle: every one) is counted in led when its Settle returns
// nil.
func handling(t *testing.T, led *testbroker.Ledger, handle func(topology.Reader[int], *topology.Letter[int]) bool, rs ...topology.Reader[int]) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			buf := make([]topology.Letter[int], 16)
			for {
				n, err := r.Receive(ctx, buf)
				if err != nil {
					return
				}
				for i := range buf[:n] {
					l := &buf[i]
					counted := handle == nil || handle(r, l)
					switch err := r.Settle(ctx, l); {
					case err == nil:
						if counted {
							led.Handle(l.Value)
						}
					case errors.Is(err, pulsartopology.ErrNotSettled):
					default:
						if ctx.Err() == nil {
							t.Errorf("Settle(%d): %v", l.Value, err)
						}
					}
				}
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// allSettled waits until every publish of led that returned nil was
// handled and the group has nothing left unacknowledged on the topics
// fulls. n is the test's letter count, which the wait grows with
// (testbroker.FaultPatience).
func allSettled(t *testing.T, br *pulsartest.Broker, led *testbroker.Ledger, n int, group string, fulls ...string) {
	t.Helper()
	backlog := func() int64 {
		var n int64
		for _, f := range fulls {
			n += max(br.Backlog(f, group), 0)
		}
		return n
	}
	wait.Within(t, testbroker.FaultPatience(faultPatience, n), "every letter handled and the group's backlog empty", func() bool {
		return len(led.Unhandled()) == 0 && backlog() == 0
	}, func() string { return fmt.Sprintf("never handled: %v; backlog %d", led.Unhandled(), backlog()) })
}

func decodeInt(p []byte) (int, error) { return topic.IntCodec{}.Decode(p) }

// holdTopic and dlqTopic are the Pulsar topics of q's hold and DLQ.
func holdTopic(be *pulsartopology.Backend[int], q topology.Queues[int]) string {
	return be.TopicName(q.Topology().Holds()[0].Name)
}

func dlqTopic(be *pulsartopology.Backend[int], q topology.Queues[int]) string {
	name, _ := q.Topology().DLQ()
	return be.TopicName(name)
}

// Guarantee: while the broker drops every connection, withholds send
// receipts and then releases them, or withholds them and drops the
// connections, every Publish that returned nil is stored in the main
// topic and delivered to the group at least once, and every letter
// missing from the topic was reported failed.
func TestAPublishThatReturnedNilIsDeliveredThroughDroppedConnectionsAndWithheldReceipts(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := faultBackend(t, br)
	q := faultTopology(t, be, "lossy-publish")
	led := testbroker.NewLedger()
	handling(t, led, nil, reader(t, q))
	n := testbroker.PulsarFaultCount(t)
	testbroker.PublishThroughPulsarFaults(t, br, be.TopicName("lossy-publish"), n,
		func(ctx context.Context, v int) error { return q.Publish(ctx, topology.Letter[int]{Value: v}) }, decodeInt)
	allSettled(t, br, led, n, "lossy-publish", be.TopicName("lossy-publish"))
}

// Guarantee: acknowledgements the broker never recorded (withheld, then
// their connection dropped) lose nothing: the letters come again after
// the reconnection, as do those received and not yet settled, until
// every letter is acknowledged at the broker.
func TestAcksTheBrokerNeverRecordedDeliverTheirLettersAgain(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := faultBackend(t, br)
	q := faultTopology(t, be, "lossy-ack")
	main := be.TopicName("lossy-ack")
	r := reader(t, q)
	n := testbroker.PulsarFaultCount(t)
	led := testbroker.NewLedger()
	publishLetters(t, q, led, n)
	// r settles the first third at the broker, then up to a third more
	// (but every fifth letter) while the broker withholds the acks: no
	// more than its read-ahead, as the permits it asks for wait behind
	// the acks withheld.
	take(t, r, led, n/3, nil)
	wait.Within(t, faultPatience, "the first third acknowledged at the broker", func() bool { return br.Backlog(main, "lossy-ack") == int64(n-n/3) })
	release := br.Withhold(pulsartest.CommandAck)
	t.Cleanup(release)
	take(t, r, led, min(n/3, 500), func(_, v int) bool { return v%5 == 0 })
	wait.Within(t, faultPatience, "an ack withheld", func() bool { return br.Stats().Withheld > 0 })
	before := br.Stats()
	br.DropConnections()
	release()
	var again atomic.Int64
	handling(t, led, func(_ topology.Reader[int], l *topology.Letter[int]) bool {
		if led.Handled(l.Value) {
			again.Add(1)
		}
		return true
	}, r)
	allSettled(t, br, led, n, "lossy-ack", main)
	testbroker.PulsarReopened(t, br, before)
	if again.Load() == 0 {
		t.Errorf("no letter whose ack was withheld came again")
	}
	t.Logf("%d settled letters delivered again", again.Load())
}

// Guarantee: a reader that closes while it holds unsettled letters (and
// its read-ahead), and a reader that subscribes while another holds
// unsettled ones, lose nothing: the closed reader's late settles fail,
// and every letter is settled by some reader.
func TestReadersLeavingAndJoiningLoseNoLetter(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := faultBackend(t, br)
	q := faultTopology(t, be, "lossy-readers")
	r1, r2 := reader(t, q), reader(t, q)
	n := testbroker.PulsarFaultCount(t)
	led := testbroker.NewLedger()
	publishLetters(t, q, led, n)
	held1, held2 := take(t, r1, led, n/5, lastFive(n/5)), take(t, r2, led, n/5, lastFive(n/5))
	topologytest.MustClose(t, "the first reader", r1.Close) // with five letters in flight
	for i := range held1 {
		if err := r1.Settle(ctxT(t), &held1[i]); err == nil {
			t.Errorf("Settle(%d) after its reader closed = nil, want an error", held1[i].Value)
		}
	}
	r3 := reader(t, q) // joins while r2 holds five
	for i := range held2 {
		if err := r2.Settle(ctxT(t), &held2[i]); err != nil {
			t.Fatalf("Settle(%d) after a reader joined: %v", held2[i].Value, err)
		}
		led.Handle(held2[i].Value)
	}
	handling(t, led, nil, r2, r3)
	allSettled(t, br, led, n, "lossy-readers", be.TopicName("lossy-readers"))
}

// Guarantee: a main topic unloaded while letters are published and read
// loses nothing: its producer and readers come back, every publish
// returns nil, and every letter is settled. (With the race detector the
// letters are published through the broker's API, see
// testbroker.RaceDetector.)
func TestAnUnloadedMainTopicLosesNothingAndResumes(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := faultBackend(t, br)
	q := faultTopology(t, be, "lossy-unload")
	main := be.TopicName("lossy-unload")
	led := testbroker.NewLedger()
	handling(t, led, nil, reader(t, q), reader(t, q))
	n := testbroker.PulsarFaultCount(t)
	publish := testbroker.PulsarPublisher(br, main, topic.IntCodec{}.Encode, func(v int) error {
		return q.Publish(ctxT(t), topology.Letter[int]{Value: v})
	})
	var wg sync.WaitGroup
	before := br.Stats()
	wg.Go(func() { testbroker.PublishRange(led, 0, n, publish, nil) })
	for _, at := range []int{n / 4, n / 2} {
		wait.Within(t, testbroker.FaultPatience(faultPatience, n), "publishes", func() bool { p, f := led.Counts(); return p+f >= at })
		if err := br.Unload(main); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if p, f := led.Counts(); p != n {
		t.Errorf("%d publishes returned nil and %d failed across 2 unloads, want every one nil", p, f)
	}
	allSettled(t, br, led, n, "lossy-unload", main)
	testbroker.PulsarReopened(t, br, before)
}

// Guarantee: letters held (their hold's send receipted, their message on
// the main topic acknowledged) while the broker drops every connection
// come back after their hold, no sooner, and none is lost. Without the
// race detector the connections drop while the holds are being sent.
func TestHeldLettersComeBackAfterTheirHoldThroughDroppedConnections(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := faultBackend(t, br)
	q := faultTopology(t, be, "lossy-hold")
	r := reader(t, q)
	const n = 40
	led := testbroker.NewLedger()
	publishLetters(t, q, led, n)
	// Each letter is held with one retry, as a source holds it, so that
	// it comes back with Retries 1; one that comes again from the main
	// topic (its ack lost with the connection) has none.
	heldAt := map[int]time.Time{}
	before := br.Stats()
	dropped := false
	for len(heldAt) < n {
		if len(heldAt) == n/2 && !dropped && !testbroker.RaceDetector {
			br.DropConnections()
			dropped = true
		}
		l := receiveLetter(t, r)
		if _, ok := heldAt[l.Value]; !ok {
			// A letter whose ack the drop lost comes again and is held
			// again: its first hold may come back first.
			heldAt[l.Value] = time.Now()
		}
		l.Retries = 1
		if err := q.Hold(ctxT(t), 0, l); err != nil {
			t.Fatalf("Hold(%d): %v", l.Value, err)
		}
		if err := r.Settle(ctxT(t), &l); err != nil {
			t.Fatalf("Settle(%d): %v", l.Value, err)
		}
	}
	if testbroker.RaceDetector {
		br.DropConnections()
	}
	back := map[int]time.Duration{}
	for len(back) < n {
		l := receiveLetter(t, r)
		if _, ok := back[l.Value]; !ok && l.Retries == 1 {
			back[l.Value] = time.Since(heldAt[l.Value])
		}
		if err := r.Settle(ctxT(t), &l); err != nil {
			t.Fatalf("Settle(%d): %v", l.Value, err)
		}
		led.Handle(l.Value)
	}
	for v, d := range back {
		if d < faultHold-time.Millisecond {
			t.Errorf("letter %d came back %v after its hold was sent, before its hold of %v", v, d, faultHold)
		}
	}
	allSettled(t, br, led, n, "lossy-hold", be.TopicName("lossy-hold"), holdTopic(be, q))
	testbroker.PulsarReopened(t, br, before)
}

// Guarantee: a dead-lettering whose send the broker withholds until its
// context ends fails, and loses no letter: Settle leaves the letter
// unacknowledged (ErrNotSettled), it comes back to the group, and once
// dead-lettered it is in the DLQ.
func TestAFailedDeadLetteringLosesNoLetter(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := faultBackend(t, br)
	q := faultTopology(t, be, "lossy-dead")
	main, dlq := be.TopicName("lossy-dead"), dlqTopic(be, q)
	r := reader(t, q)
	const n = 10
	led := testbroker.NewLedger()
	publishLetters(t, q, led, n)
	before := br.Stats()
	for range n {
		l := receiveLetter(t, r)
		release := br.Withhold(pulsartest.CommandSend)
		t.Cleanup(release)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := q.DeadLetter(ctx, l)
		cancel()
		if !errors.Is(err, pulsartopology.ErrSend) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("DeadLetter(%d) with its send withheld = %v, want ErrSend and context.DeadlineExceeded", l.Value, err)
		}
		if err := r.Settle(ctxT(t), &l); !errors.Is(err, pulsartopology.ErrNotSettled) {
			t.Fatalf("Settle(%d) after its dead-lettering failed = %v, want ErrNotSettled", l.Value, err)
		}
		if !testbroker.RaceDetector {
			br.DropConnections()
		}
		release()
	}
	handling(t, led, func(r topology.Reader[int], l *topology.Letter[int]) bool {
		if err := q.DeadLetter(ctxT(t), *l); err != nil {
			t.Errorf("DeadLetter(%d): %v", l.Value, err)
			return false
		}
		return true
	}, r)
	allSettled(t, br, led, n, "lossy-dead", main)
	testbroker.PulsarReopened(t, br, before)
	dead := map[int]bool{}
	for _, m := range br.Messages(dlq) {
		if v, err := decodeInt(m.Payload); err == nil {
			dead[v] = true
		}
	}
	if lost, _ := led.Unstored(dead); len(lost) > 0 {
		t.Errorf("letters never in the DLQ: %v", lost)
	}
}

// Guarantee: a letter's message on the main topic is not acknowledged
// before the send of its hold is receipted: Hold waits for the broker's
// receipt, so a retry whose hold the broker withholds neither returns
// nor lets its letter go; released, the hold returns nil, the letter is
// settled and comes back after its hold.
func TestARetriedLetterIsNotAcknowledgedBeforeItsHoldIsReceipted(t *testing.T) {
	br := testbroker.Pulsar(t)
	// The hold is sent through one backend and the letter read through
	// another, so that the reader's connection carries its acks while the
	// broker withholds the hold's send on the other.
	sender, receiver := faultBackend(t, br), faultBackend(t, br)
	qs := faultTopology(t, sender, "lossy-retry")
	qr := faultTopology(t, receiver, "lossy-retry")
	main := receiver.TopicName("lossy-retry")
	r := reader(t, qr)
	if err := qr.Publish(ctxT(t), topology.Letter[int]{Value: 7}); err != nil {
		t.Fatal(err)
	}
	l := receiveLetter(t, r)
	release := br.Withhold(pulsartest.CommandSend)
	t.Cleanup(release)
	held := make(chan error, 1)
	go func() {
		// As a topology source retries: the letter is settled once its
		// hold returned nil.
		err := qs.Hold(context.Background(), 0, l)
		if err == nil {
			err = r.Settle(context.Background(), &l)
		}
		held <- err
	}()
	wait.Within(t, faultPatience, "the hold's send withheld", func() bool { return br.Stats().Withheld > 0 })
	select {
	case err := <-held:
		t.Fatalf("Hold returned (%v) while the broker withholds its send's receipt", err)
	default:
	}
	if got := br.Backlog(main, "lossy-retry"); got != 1 {
		t.Fatalf("the main topic's backlog is %d while the hold's send is withheld, want 1", got)
	}
	release()
	if err := <-held; err != nil {
		t.Fatalf("Hold and Settle once released: %v", err)
	}
	back := receiveLetter(t, r)
	if back.Value != 7 {
		t.Fatalf("letter %d came back, want 7", back.Value)
	}
	if err := r.Settle(ctxT(t), &back); err != nil {
		t.Fatal(err)
	}
	led := testbroker.NewLedger()
	allSettled(t, br, led, 1, "lossy-retry", main, holdTopic(receiver, qr))
}
