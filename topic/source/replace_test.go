package source_test

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// heldBackend is a topic backend whose subscriptions the test feeds by
// hand (heldSub.in), and whose subscription Close waits until the test
// releases it, as the Close of a Kafka topic's member waits for a cluster
// that does not answer (up to kafkatopic's AdminTimeout).
type heldBackend struct {
	mu       sync.Mutex
	subs     []*heldSub
	released bool
	// hold, once set by holdSubscribes, makes each Subscribe wait until it
	// is closed, telling entered first; with honourCtx, only until the
	// Subscribe's context ends too (it then subscribes nothing), as a
	// broker's backend does.
	hold, entered chan struct{}
	honourCtx     bool
	// cutSlowly, when set, holds a Subscribe whose context ended until it
	// is closed, as a backend returns some time after the context ends.
	cutSlowly chan struct{}
	// panics is how many of the next Subscribes panic, as a backend
	// written by a user (or a codec inside it) may; exits how many of
	// them then end the goroutine (runtime.Goexit, as t.FailNow does).
	panics, exits int
	// settleErr, when set, is what every Settle of a subscription returns
	// (ErrMessageNotTracked when not).
	settleErr error
	// closePanics makes the Close of the subscriptions made from then on
	// panic once it has closed them, as a backend written by a user may.
	closePanics bool
	// opts are the options of every Subscribe, in order.
	opts []topic.SubscriberOptions
}

// holdSubscribes makes every later Subscribe wait until release is
// called, as a Kafka topic's Subscribe waits on a cluster that does not
// answer (up to kafkatopic's AdminTimeout). entered receives once for each
// Subscribe that starts waiting.
func (b *heldBackend) holdSubscribes() (entered <-chan struct{}, release func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hold, b.entered = make(chan struct{}), make(chan struct{}, 8)
	var once sync.Once
	hold := b.hold
	return b.entered, func() { once.Do(func() { close(hold) }) }
}

func (*heldBackend) Name() string { return "held" }

func (*heldBackend) Capabilities() topic.Capabilities {
	return topic.InMemory[int]{}.Capabilities()
}

func (b *heldBackend) NewTopic(context.Context, topic.Name, topic.Options) (topic.State[int], error) {
	return &heldState{b: b, closed: make(chan struct{})}, nil
}

// sub returns the i-th subscription made (0 is the first).
func (b *heldBackend) sub(t *testing.T, i int) *heldSub {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if i >= len(b.subs) {
		t.Fatalf("subscription %d was never made (%d made)", i, len(b.subs))
	}
	return b.subs[i]
}

// releaseAll lets every Close made so far, and every later one, return.
func (b *heldBackend) releaseAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.released = true
	for _, s := range b.subs {
		s.release()
	}
}

// heldTopic declares the topic "held" with opts on a new heldBackend,
// closed at t's cleanup.
func heldTopic(t *testing.T, opts topic.Options) (*heldBackend, *topic.Handle[int]) {
	t.Helper()
	b := &heldBackend{}
	h, err := topic.NewTopic[int]("held", opts, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return b, h
}

// heldState is the topic side of a heldBackend: publishing is refused
// (the test feeds the subscriptions itself), closing the topic ends them.
type heldState struct {
	b      *heldBackend
	once   sync.Once
	closed chan struct{}
}

func (*heldState) Publish(context.Context, topic.Envelope[int], topic.OnFull) (topic.PublishOutcome, error) {
	return topic.Published, topic.ErrTopicClosed
}

func (*heldState) TryPublish(topic.Envelope[int]) (topic.PublishOutcome, error) {
	return topic.Published, topic.ErrTopicClosed
}

func (s *heldState) Subscribe(ctx context.Context, _ topic.SubscriptionMode, opts topic.SubscriberOptions) (topic.SubscriptionState[int], error) {
	s.b.mu.Lock()
	s.b.opts = append(s.b.opts, opts)
	hold, entered, cutSlowly := s.b.hold, s.b.entered, s.b.cutSlowly
	if !s.b.honourCtx {
		ctx = context.Background()
	}
	panics := s.b.panics > 0
	if panics {
		s.b.panics--
	}
	exits := !panics && s.b.exits > 0
	if exits {
		s.b.exits--
	}
	s.b.mu.Unlock()
	if panics {
		panic("held backend: subscribe broke")
	}
	if exits {
		runtime.Goexit()
	}
	if hold != nil {
		entered <- struct{}{}
		select {
		case <-hold:
		case <-ctx.Done():
			if cutSlowly != nil {
				<-cutSlowly
			}
			return nil, ctx.Err()
		}
	}
	sub := &heldSub{in: make(chan topic.Envelope[int], 8), fail: make(chan error, 1), crash: make(chan func(), 1), topicClosed: s.closed,
		closing: make(chan struct{}), gate: make(chan struct{}), closed: make(chan struct{}),
		settleErr: cmp.Or(s.b.settleErr, topic.ErrMessageNotTracked), closePanics: s.b.closePanics}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.b.released {
		sub.release()
	}
	s.b.subs = append(s.b.subs, sub)
	return sub, nil
}

func (*heldState) Stats() topic.StateStats { return topic.StateStats{} }

func (s *heldState) Close() { s.once.Do(func() { close(s.closed) }) }

// heldSub is one subscription of a heldBackend. Receive returns what the
// test sends on in, and ErrSubscriptionClosed once in is closed (the topic
// disconnected it) or the subscription or topic is closed; it fails with
// what the test sends on fail, and calls what the test sends on crash
// (which panics or ends the goroutine, as a backend written by a user
// may).
type heldSub struct {
	in          chan topic.Envelope[int]
	fail        chan error
	crash       chan func()
	topicClosed <-chan struct{}
	settleErr   error
	closePanics bool
	// widest is the largest buffer a Receive was given.
	widest atomic.Int64

	startOnce, gateOnce, doneOnce sync.Once
	closing                       chan struct{} // closed when Close is first called
	gate                          chan struct{} // closed by release: Close may return
	closed                        chan struct{} // closed once Close has returned
}

func (s *heldSub) Receive(ctx context.Context, dst []topic.Envelope[int]) (int, error) {
	if n := int64(len(dst)); n > s.widest.Load() {
		s.widest.Store(n) // Receives of a subscription do not overlap
	}
	select {
	case e, ok := <-s.in:
		if !ok {
			return 0, topic.ErrSubscriptionClosed
		}
		dst[0] = e
		return 1, nil
	case err := <-s.fail:
		return 0, err
	case crash := <-s.crash:
		crash()
		return 0, nil // not reached: crash panics or ends the goroutine
	case <-s.closing:
		return 0, topic.ErrSubscriptionClosed
	case <-s.topicClosed:
		return 0, topic.ErrSubscriptionClosed
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (s *heldSub) Settle(topic.MessageID, error) error { return s.settleErr }

func (s *heldSub) Close() {
	s.startOnce.Do(func() { close(s.closing) })
	<-s.gate
	s.doneOnce.Do(func() { close(s.closed) })
	if s.closePanics {
		panic("held backend: close broke")
	}
}

func (s *heldSub) release() { s.gateOnce.Do(func() { close(s.gate) }) }

// disconnect plays the topic disconnecting a lagging subscriber: a lag
// notice, then the end of the subscription.
func (s *heldSub) disconnect() {
	s.in <- topic.Envelope[int]{Lagged: 1}
	close(s.in)
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// replaceRig starts, inside a synctest bubble, a pipeline reading a
// broadcast topic (on_lag disconnect) of a heldBackend through a source,
// with the handler given. It returns the backend and the source; the
// source's first subscription is the backend's subscription 0.
func replaceRig(t *testing.T, handle processor.Handler[int, int]) (*heldBackend, *source.Source[int]) {
	t.Helper()
	return wrapRig(t, handle, func(src *source.Source[int]) producer.Source[int] { return src })
}

// wrapRig is replaceRig with the pipeline reading wrap(source) instead of
// the source itself.
func wrapRig(t *testing.T, handle processor.Handler[int, int], wrap func(*source.Source[int]) producer.Source[int]) (*heldBackend, *source.Source[int]) {
	t.Helper()
	b, h := heldTopic(t, topic.Options{Mode: topic.BroadcastOnly,
		Broadcast: topic.BroadcastPolicy{OnLag: topic.Disconnect}})
	src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Broadcast()})
	if err != nil {
		t.Fatal(err)
	}
	run(t, pipeline.Options[int, int]{
		Name:       "held",
		Producer:   producer.Options[int]{Source: wrap(src)},
		Processors: processor.Options[int, int]{Concurrency: 1, Handle: handle},
	})
	// Stops every closing still held before the pipeline is stopped (the
	// cleanups run in reverse order).
	t.Cleanup(b.releaseAll)
	return b, src
}

// deferRig is replaceRig with a handler that defers every message and
// hands it over to the test, which settles it itself.
func deferRig(t *testing.T) (*heldBackend, *source.Source[int], <-chan deferred) {
	t.Helper()
	got := make(chan deferred, 8)
	b, src := replaceRig(t, func(_ context.Context, m *message.Message[int]) (int, error) {
		m.Defer()
		ack, id, _ := m.Acknowledger()
		got <- deferred{ack, id}
		return m.Data, nil
	})
	return b, src, got
}

// retireInFlight has the first subscription deliver one message, which the
// test holds, then be disconnected: the source replaces it while that
// message is in flight. It returns the message.
func retireInFlight(t *testing.T, b *heldBackend, src *source.Source[int], got <-chan deferred) deferred {
	t.Helper()
	first := b.sub(t, 0)
	first.in <- topic.Envelope[int]{ID: 1, Value: 1}
	d := <-got
	first.disconnect()
	synctest.Wait()
	if st := src.Stats(); st.Resubscribes != 1 {
		t.Fatalf("stats %+v, want the disconnected subscription replaced", st)
	}
	if isClosed(first.closing) {
		t.Fatal("the replaced subscription was closed with a message still in flight")
	}
	return d
}

// Guarantee: acking the last in-flight message of a subscription the
// source replaced returns without waiting for that subscription's Close
// (which, on a Kafka topic whose cluster does not answer, takes up to
// the backend's AdminTimeout); the source still closes it.
func TestAckDoesNotWaitForTheClosingOfAReplacedSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, src, got := deferRig(t)
		d := retireInFlight(t, b, src, got)
		first := b.sub(t, 0)

		acked := make(chan struct{})
		go func() {
			defer close(acked)
			d.ack.Ack(context.Background(), []acker.Outcome{{ID: d.id}}, nil)
		}()
		synctest.Wait()
		if !isClosed(acked) {
			t.Error("Ack of the replaced subscription's last message waits for that subscription's Close")
		}
		if !isClosed(first.closing) {
			t.Error("the replaced subscription was not closed once its last message was acked")
		}
		first.release()
		<-acked
		synctest.Wait()
		if !isClosed(first.closed) {
			t.Error("the replaced subscription's Close never returned once released")
		}
	})
}

// Guarantee: replacing a disconnected subscription with nothing in
// flight does not hold up the messages of the new one while the old one's
// Close waits on its backend; the old one is still closed.
func TestDeliveryDoesNotWaitForTheClosingOfAReplacedSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		handled := make(chan int, 8)
		b, src := replaceRig(t, func(_ context.Context, m *message.Message[int]) (int, error) {
			handled <- m.Data
			return m.Data, nil
		})
		first := b.sub(t, 0)
		first.disconnect()
		synctest.Wait()
		if st := src.Stats(); st.Resubscribes != 1 {
			t.Fatalf("stats %+v, want the disconnected subscription replaced", st)
		}
		if !isClosed(first.closing) {
			t.Error("the replaced subscription, with nothing in flight, was not closed")
		}
		b.sub(t, 1).in <- topic.Envelope[int]{ID: 2, Value: 2}
		synctest.Wait()
		expectHandled(t, handled, 2, "the new subscription's message waits for the replaced subscription's Close")
		first.release()
	})
}

// Guarantee: Close waits, within its context, for the closing of a
// replaced subscription that is under way: while that closing waits on
// its backend, Close returns at its deadline with an error wrapping
// context.DeadlineExceeded; once it has ended, a later Close returns nil.
func TestCloseWaitsForTheClosingOfAReplacedSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, src, got := deferRig(t)
		d := retireInFlight(t, b, src, got)
		first := b.sub(t, 0)
		b.sub(t, 1).release() // the current subscription closes at once
		acked := make(chan struct{})
		go func() {
			defer close(acked)
			d.ack.Ack(context.Background(), []acker.Outcome{{ID: d.id}}, nil)
		}()
		synctest.Wait()

		const wait = time.Second
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		begin := time.Now()
		err := src.Close(ctx)
		if took := time.Since(begin); took != wait || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v after %v while a replaced subscription's closing waits, want context.DeadlineExceeded after %v", err, took, wait)
		}
		if !isClosed(b.sub(t, 1).closed) {
			t.Error("Close did not close the current subscription")
		}
		first.release()
		<-acked
		if err := src.Close(context.Background()); err != nil {
			t.Fatalf("a later Close, once the closing could end = %v, want nil", err)
		}
		if !isClosed(first.closed) {
			t.Error("Close returned before the replaced subscription's Close did")
		}
	})
}

// rerun is a source whose stage runs it twice, as a stage runs its source
// again once a Run has returned: the first Run's context also ends when
// cut ends, and first is closed once that Run has returned.
type rerun struct {
	*source.Source[int]
	cut   context.Context
	first chan struct{}
}

func (r *rerun) Run(ctx context.Context, st *producer.Stage[int]) error {
	first, stop := context.WithCancel(ctx)
	defer stop()
	unhook := context.AfterFunc(r.cut, stop)
	err := r.Source.Run(first, st)
	unhook()
	close(r.first)
	if err != nil || ctx.Err() != nil {
		return err
	}
	return r.Source.Run(ctx, st)
}

// Guarantee: once the topic disconnected a lagging broadcast subscription,
// nothing is received through the source until the subscription replacing
// it is made, and Stats.Resubscribes counts it only then. A Run stopped
// while that subscribe waits on its backend returns at once; on a backend
// that does not honour the subscribe's context, the next Run waits for
// the same subscribe (it makes no other, and does not receive from the
// disconnected subscription), then receives from the new one.
func TestTheNextRunAwaitsAResubscribeLeftUnderWay(t *testing.T) {
	stopRunWhileResubscribing(t, false)
}

// Guarantee: the subscribe replacing a disconnected broadcast
// subscription is bounded by the context of the Run that began it: on a
// backend that honours it, the Run stopped while it waits ends it, with
// nothing subscribed, and the next Run, which finds it ended that way,
// subscribes anew under its own context instead of failing, then
// receives from the new subscription.
func TestTheNextRunSubscribesAnewWhenTheStoppedRunsResubscribeWasCut(t *testing.T) {
	stopRunWhileResubscribing(t, true)
}

// stopRunWhileResubscribing runs a broadcast source, whose stage runs it
// twice (rerun), on a heldBackend that honours the Subscribe's context or
// not, has the topic disconnect its subscription, and stops the first Run
// while the subscribe replacing it waits. It checks that the Run returns
// at once, that the next Run makes a subscribe of its own only when the
// backend ended the first with its context, and, once the subscribes are
// released, that the next Run receives from the new subscription, counted
// then as the one resubscribe.
func stopRunWhileResubscribing(t *testing.T, honourCtx bool) {
	synctest.Test(t, func(t *testing.T) {
		cut, stop := context.WithCancel(context.Background())
		defer stop()
		r := &rerun{cut: cut, first: make(chan struct{})}
		handled := make(chan int, 8)
		b, src := wrapRig(t, func(_ context.Context, m *message.Message[int]) (int, error) {
			handled <- m.Data
			return m.Data, nil
		}, func(src *source.Source[int]) producer.Source[int] {
			r.Source = src
			return r
		})
		b.mu.Lock()
		b.honourCtx = honourCtx
		b.mu.Unlock()
		entered, release := b.holdSubscribes()
		t.Cleanup(release)
		b.sub(t, 0).disconnect()
		synctest.Wait()
		if n := len(entered); n != 1 {
			t.Fatalf("%d subscribes wait, want the one replacing the disconnected subscription", n)
		}
		<-entered
		if st := src.Stats(); st.LagNotices != 1 || st.Resubscribes != 0 || st.Subscriptions != 1 {
			t.Fatalf("stats %+v while the resubscribe waits, want the lag notice counted and no resubscribe yet", st)
		}

		stop()
		synctest.Wait()
		if !isClosed(r.first) {
			t.Fatal("the Run stopped while its resubscribe waits has not returned")
		}
		want, why := 0, "want it to wait for the one under way"
		if honourCtx {
			want, why = 1, "want one of its own in place of the one its predecessor's context ended"
		}
		if n := len(entered); n != want {
			t.Fatalf("the next Run made %d subscribes of its own, %s", n, why)
		}
		if st := src.Stats(); st.Resubscribes != 0 || st.Received != 0 || st.Subscriptions != 1 {
			t.Fatalf("stats %+v before the resubscribe ended, want nothing more counted", st)
		}

		release()
		synctest.Wait()
		if st := src.Stats(); st.Resubscribes != 1 || st.Subscriptions != 2 {
			t.Fatalf("stats %+v once the resubscribe ended, want it counted", st)
		}
		b.sub(t, 1).in <- topic.Envelope[int]{ID: 2, Value: 2}
		synctest.Wait()
		expectHandled(t, handled, 2, "the next Run did not receive from the new subscription")
	})
}

// expectHandled checks, in a synctest bubble once it has settled, that
// the handler has handled want; otherwise it reports missing.
func expectHandled(t *testing.T, handled <-chan int, want int, missing string) {
	t.Helper()
	select {
	case v := <-handled:
		if v != want {
			t.Errorf("handled %d, want %d", v, want)
		}
	default:
		t.Error(missing)
	}
}

// Guarantee: a Receive that fails with another error than a closed
// subscription or topic fails the stage's Run; the stage's next Run
// receives through a new subscription, and the failed one is closed.
// Stats.Resubscribes, which counts the replacements of lagging
// subscriptions, does not count it.
func TestARunAfterAFailedReceiveReceivesThroughANewSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, h := heldTopic(t, topic.Options{})
		b.releaseAll() // the subscriptions' Close returns at once
		r := &runErrors{Source: newSource(t, h, topic.Balanced("g")), errs: make(chan error, 4)}
		handled := runHandling(t, r)
		broken := errors.New("consumer given up")
		b.sub(t, 0).fail <- broken
		if err := <-r.errs; !errors.Is(err, broken) {
			t.Fatalf("Run after a failed Receive = %v, want %v", err, broken)
		}
		wait.For(t, "the stage's next Run to subscribe again", func() bool { return r.Stats().Subscriptions == 2 })
		b.sub(t, 1).in <- topic.Envelope[int]{ID: 1, Value: 1}
		if v := <-handled; v != 1 {
			t.Fatalf("handled %d, want the new subscription's 1", v)
		}
		synctest.Wait()
		if !isClosed(b.sub(t, 0).closed) {
			t.Fatal("the subscription whose Receive failed was not closed once replaced")
		}
		if st := r.Stats(); st.Subscriptions != 2 || st.Resubscribes != 0 {
			t.Fatalf("stats %+v, want 2 subscriptions and no resubscribe (nothing lagged)", st)
		}
	})
}

// runHandling runs the pipeline "held" reading src with one processor,
// which sends each message's value on the returned channel.
func runHandling(t *testing.T, src producer.Source[int]) <-chan int {
	t.Helper()
	handled := make(chan int, 8)
	run(t, pipeline.Options[int, int]{
		Name:     "held",
		Producer: producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			handled <- m.Data
			return m.Data, nil
		}},
	})
	return handled
}

// Guarantee: a Run whose broadcast subscription lagged on a disconnect
// topic, and whose source is closed before it subscribes again, ends
// without an error, as a Run whose subscription the source's Close
// closed does: it does not fail the stage.
func TestARunLaggingAfterCloseEndsWithoutAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, h := heldTopic(t, topic.Options{Mode: topic.BroadcastOnly,
			Broadcast: topic.BroadcastPolicy{OnLag: topic.Disconnect}})
		b.releaseAll() // the subscriptions' Close returns at once
		r := &runErrors{Source: newSource(t, h, topic.Broadcast()), errs: make(chan error, 4)}
		runHandling(t, r)
		b.sub(t, 0).in <- topic.Envelope[int]{Lagged: 1}
		wait.For(t, "the lag notice", func() bool { return r.Stats().LagNotices == 1 })
		if err := r.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := len(r.errs); n != 0 {
			t.Fatalf("Run failed with %v after its source was closed, want it to end", <-r.errs)
		}
	})
}
