package pulsartopology_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a group reader's TryReceive with nothing ready returns 0 and
// no error at once: only a dead-letter reader catches up with its topic.
func TestAGroupReadersTryReceiveWithNothingReadyReturnsZero(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{})))
	_, r := declared(t, be, build(t, topology.New("idle").Hold(time.Second).DLQ()))
	if n, err := r.TryReceive(ctxT(t), make([]topology.Letter[string], 1)); n != 0 || err != nil {
		t.Fatalf("TryReceive of an idle group reader = %d, %v; want 0, nil", n, err)
	}
}

// Guarantee: a dead-letter reader's TryReceive waits for its marker to
// come back for Options.OperationTimeout at most, even under a context
// without deadline: it then returns an error wrapping ErrCatchUp, and no
// context error.
func TestADeadReadersCatchUpIsBoundedByTheOperationTimeout(t *testing.T) {
	br := testbroker.Pulsar(t)
	o := options(br, topic.Codec[string](topic.StringCodec{}))
	o.OperationTimeout = time.Second
	be := newBackend(t, o)
	q, err := be.Declare(ctxT(t), build(t, topology.New("stalled").DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := q.SubscribeDead(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	br.StallDispatch(full("stalled-dlq"), true)
	t.Cleanup(func() { br.StallDispatch(full("stalled-dlq"), false) })
	tried := make(chan error, 1)
	go func() {
		_, err := r.TryReceive(context.Background(), make([]topology.Letter[string], 1))
		tried <- err
	}()
	select {
	case err := <-tried:
		if !errors.Is(err, pulsartopology.ErrCatchUp) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("TryReceive whose marker does not come back = %v, want ErrCatchUp and no context error", err)
		}
		topologytest.MustClose(t, "a reader", r.Close)
	case <-time.After(patience):
		topologytest.MustClose(t, "a reader", r.Close)
		t.Fatalf("TryReceive still waits for its marker %v after it was sent (Options.OperationTimeout 1s); after Close: %v", patience, <-tried)
	}
}

// Guarantee: a dead-letter reader's TryReceive whose context ends before
// its marker comes back returns an error wrapping both ErrCatchUp and the
// context's error.
func TestADeadReadersCatchUpCutByItsContextWrapsBoth(t *testing.T) {
	br := testbroker.Pulsar(t)
	r := deadReaderOf(t, br, "cut", time.Minute)
	defer topologytest.MustClose(t, "a reader", r.Close)
	br.StallDispatch(full("cut-dlq"), true)
	t.Cleanup(func() { br.StallDispatch(full("cut-dlq"), false) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := r.TryReceive(ctx, make([]topology.Letter[string], 1)); !errors.Is(err, pulsartopology.ErrCatchUp) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("TryReceive whose context ends before its marker comes back = %v, want ErrCatchUp and context.DeadlineExceeded", err)
	}
}

// Guarantee: Hold with an index that names no hold queue returns an error
// and sends nothing.
func TestHoldOnAQueueThatDoesNotExistFails(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{})))
	q, err := be.Declare(ctxT(t), build(t, topology.New("two-holds").Hold(time.Second).Hold(2*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{-1, 2} {
		if err := q.Hold(ctxT(t), i, topology.Letter[string]{Value: "x"}); err == nil {
			t.Errorf("Hold on queue %d of 2 succeeded", i)
		}
	}
	for _, h := range []string{"two-holds-hold-1s", "two-holds-hold-2s"} {
		if n := len(br.Messages(full(h))); n != 0 {
			t.Errorf("hold topic %s holds %d messages, want none", h, n)
		}
	}
}

// Guarantee: a letter given back with Return is not acknowledged by a
// later Settle: Settle returns ErrNotSettled and the broker delivers the
// letter to the group again.
func TestASettleAfterReturnLeavesTheLetterToComeBack(t *testing.T) {
	br := testbroker.Pulsar(t)
	o := options(br, topic.Codec[string](topic.StringCodec{}))
	o.RedeliveryDelay = 50 * time.Millisecond
	be := newBackend(t, o)
	q, r := declared(t, be, build(t, topology.New("given-back").Hold(time.Second)))
	if err := q.Publish(ctxT(t), topology.Letter[string]{Value: "x"}); err != nil {
		t.Fatal(err)
	}
	l := receiveOne(t, r)
	if err := q.Return(ctxT(t), []topology.Letter[string]{l}); err != nil {
		t.Fatal(err)
	}
	if err := r.Settle(ctxT(t), &l); !errors.Is(err, pulsartopology.ErrNotSettled) {
		t.Fatalf("Settle of a returned letter = %v, want ErrNotSettled", err)
	}
	if again := receiveOne(t, r); again.Value != "x" {
		t.Fatalf("delivered %q after the Settle of the returned letter, want it again", again.Value)
	}
}
