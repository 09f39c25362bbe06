package source_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// lateCtx is a context whose end is seen by Done at once, and by Err only
// once seen is closed: Err then waits until the test closes seen. It lets
// a test finish the topic's subscribe after NewContext stopped waiting for
// it and before NewContext goes on, as happens when the subscribe returns
// just as the context ends.
type lateCtx struct {
	context.Context
	done, seen chan struct{}
}

func (c *lateCtx) Done() <-chan struct{} { return c.done }

func (c *lateCtx) Err() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	<-c.seen
	return context.Canceled
}

// Guarantee: NewContext whose context ends just as the topic's subscribe
// returns a subscription returns no source and an error wrapping the
// context's, and the subscription is closed: none is left subscribed
// that no source will ever receive from or close.
func TestNewContextClosesTheSubscriptionMadeAsItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, h := heldTopic(t, topic.Options{})
		b.releaseAll() // the subscriptions' Close returns at once
		entered, release := b.holdSubscribes()
		ctx := &lateCtx{Context: context.Background(), done: make(chan struct{}), seen: make(chan struct{})}
		type result struct {
			src *source.Source[int]
			err error
		}
		res := make(chan result, 1)
		go func() {
			src, err := source.NewContext(ctx, source.Options[int]{Topic: h, Mode: topic.Balanced("g")})
			res <- result{src, err}
		}()
		<-entered
		close(ctx.done)
		synctest.Wait() // NewContext stopped waiting for the subscribe
		release()
		synctest.Wait() // the subscribe made its subscription
		close(ctx.seen)
		r := <-res
		if r.src != nil {
			_ = r.src.Close(context.Background())
			t.Error("NewContext returned a source once its context had ended")
		}
		if !errors.Is(r.err, context.Canceled) {
			t.Errorf("NewContext = %v, want an error wrapping context.Canceled", r.err)
		}
		synctest.Wait()
		if sub := b.sub(t, 0); !isClosed(sub.closed) {
			t.Error("the subscription made as NewContext's context ended was never closed")
		}
	})
}

// rerunStage runs the Run of one stage, index, as rerun does (twice, the
// first ending with cut), and every other stage's once.
type rerunStage struct {
	rerun
	index int
}

func (r *rerunStage) Run(ctx context.Context, st *producer.Stage[int]) error {
	if st.Index() != r.index {
		return r.Source.Run(ctx, st)
	}
	return r.rerun.Run(ctx, st)
}

// Guarantee: a balanced stage whose Run is stopped while its first
// subscribe waits, on a backend that ends that subscribe with the Run's
// context only some time later, runs again without failing: its next Run,
// which finds the subscribe still under way, waits for it and, once the
// backend has ended it with the stopped Run's context, subscribes anew
// under its own, then receives from the new subscription.
func TestTheNextRunSubscribesAnewWhenTheStoppedRunsFirstSubscribeIsCutLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &heldBackend{honourCtx: true}
		h, err := topic.NewTopic[int]("held", topic.Options{}, b)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Close)
		src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("g")})
		if err != nil {
			t.Fatal(err)
		}
		entered, release := b.holdSubscribes()
		cutSlowly := make(chan struct{})
		b.mu.Lock()
		b.cutSlowly = cutSlowly
		b.mu.Unlock()
		cut, stopFirst := context.WithCancel(context.Background())
		defer stopFirst()
		r := &rerunStage{rerun: rerun{Source: src, cut: cut, first: make(chan struct{})}, index: 1}
		handled := make(chan int, 8)
		run(t, pipeline.Options[int, int]{
			Name:     "held",
			Producer: producer.Options[int]{Source: r, Concurrency: 2},
			Processors: processor.Options[int, int]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				handled <- m.Data
				return m.Data, nil
			}},
		})
		t.Cleanup(b.releaseAll)
		t.Cleanup(release)
		synctest.Wait()
		if n := len(entered); n != 1 {
			t.Fatalf("%d subscribes wait, want stage 1's first", n)
		}
		<-entered

		stopFirst()
		synctest.Wait()
		if !isClosed(r.first) {
			t.Fatal("the Run stopped while its subscribe waits has not returned")
		}
		if n := len(entered); n != 0 {
			t.Fatalf("the next Run made %d subscribes while the stopped Run's was under way, want it to wait for that one", n)
		}

		close(cutSlowly)
		synctest.Wait()
		if n := len(entered); n != 1 {
			t.Fatalf("the next Run made %d subscribes once the stopped Run's was cut, want one of its own (not to fail with the stopped Run's error)", n)
		}
		release()
		synctest.Wait()
		if st := src.Stats(); st.Subscriptions != 2 {
			t.Fatalf("stats %+v once the next Run's subscribe ended, want it counted", st)
		}
		b.sub(t, 1).in <- topic.Envelope[int]{ID: 2, Value: 2}
		synctest.Wait()
		expectHandled(t, handled, 2, "the next Run did not receive from the new subscription")
	})
}
