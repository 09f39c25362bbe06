package source_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

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
		b := &heldBackend{}
		b.releaseAll() // the subscriptions' Close returns at once
		h, err := topic.NewTopic[int]("held", topic.Options{}, b)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
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
