package pulsartopology_test

import (
	"context"
	"errors"
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

// Guarantee: once a pinned dead-letter reader's end came back, its
// Receive delivers nothing dead-lettered after the pin: it waits for its
// context, which ends it with the context's error, and the letter stays
// in the DLQ for the next reader.
func TestAPinnedDeadReadersReceiveDeliversNothingPastItsEnd(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{})))
	q, err := be.Declare(ctxT(t), build(t, topology.New("pinrecv").DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	deadLetter := func(v string) {
		t.Helper()
		if err := q.DeadLetter(ctxT(t), topology.Letter[string]{Value: v, Death: &topology.Death{Reason: topology.ReasonRejected}}); err != nil {
			t.Fatal(err)
		}
	}
	deadLetter("before")
	r, err := q.SubscribeDead(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer topologytest.MustClose(t, "the DLQ reader", r.Close)
	if err := r.(topology.EndPinner).PinEnd(ctxT(t)); err != nil {
		t.Fatalf("PinEnd: %v", err)
	}
	deadLetter("after")
	var got []string
	buf := make([]topology.Letter[string], 2)
	for {
		n, err := r.TryReceive(ctxT(t), buf)
		if err != nil {
			t.Fatalf("TryReceive with %v received: %v", got, err)
		}
		if n == 0 {
			break
		}
		for i := range buf[:n] {
			got = append(got, buf[i].Value)
			if err := r.Settle(ctxT(t), &buf[i]); err != nil {
				t.Errorf("Settle %q: %v", buf[i].Value, err)
			}
		}
	}
	if len(got) != 1 || got[0] != "before" {
		t.Fatalf("TryReceive delivered %v, want [before]", got)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Second)
	defer cancel()
	if n, err := r.Receive(ctx, buf); n != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Receive past the pinned end returned %d letters (%v), %v; want 0, context.DeadlineExceeded", n, buf[:n], err)
	}
	topologytest.MustClose(t, "the DLQ reader", r.Close)
	next, err := q.SubscribeDead(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer topologytest.MustClose(t, "the next DLQ reader", next.Close)
	if n, err := next.TryReceive(ctxT(t), buf); err != nil || n != 1 || buf[0].Value != "after" {
		t.Errorf("the next reader's TryReceive returned %d letters (%v), %v; want [after]", n, buf[:n], err)
	}
}

// Guarantee: while the broker leaves the receipt of a dead-letter
// reader's pin marker unanswered, PinEnd under a context without deadline
// returns within Options.OperationTimeout (1s here, far below the
// client's, a minute) with an error wrapping ErrSend and
// context.DeadlineExceeded, and the reader is not pinned.
func TestPinEndWhoseMarkerTheBrokerWithholdsIsBoundedByTheOperationTimeout(t *testing.T) {
	br := testbroker.Pulsar(t)
	o := options(br, topic.Codec[string](topic.StringCodec{}))
	o.OperationTimeout = time.Second
	o.ClientOptions.OperationTimeout = time.Minute
	o.ClientOptions.KeepAliveInterval = time.Minute
	be := newBackend(t, o)
	q, err := be.Declare(ctxT(t), build(t, topology.New("pinheld").DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := q.SubscribeDead(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	release := br.Withhold(pulsartest.CommandSend)
	t.Cleanup(release)
	pinned := make(chan error, 1)
	go func() { pinned <- r.(topology.EndPinner).PinEnd(context.Background()) }()
	wait.For(t, "the marker to be withheld", func() bool { return br.Stats().Withheld == 1 }, func() string { return left(br) })
	select {
	case err := <-pinned:
		if !errors.Is(err, pulsartopology.ErrSend) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("PinEnd whose marker is withheld = %v, want ErrSend and context.DeadlineExceeded", err)
		}
		release()
		topologytest.MustClose(t, "the DLQ reader", r.Close)
	case <-time.After(o.OperationTimeout + testbroker.HungGrace):
		release()
		topologytest.MustClose(t, "the DLQ reader", r.Close)
		t.Fatalf("PinEnd still waits for its marker's receipt %v after it was sent (Options.OperationTimeout 1s); after Close: %v",
			o.OperationTimeout+testbroker.HungGrace, <-pinned)
	}
}

// Guarantee: a PinEnd that fails (its context had ended, so its marker
// was not sent) leaves the reader unpinned: a later TryReceive that
// catches up with the DLQ does not make that its end, and the reader
// still delivers a letter dead-lettered after it.
func TestAPinEndThatFailedLeavesTheDeadReaderUnpinned(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{})))
	q, err := be.Declare(ctxT(t), build(t, topology.New("pinfailed").DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := q.SubscribeDead(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer topologytest.MustClose(t, "the DLQ reader", r.Close)
	ended, cancel := context.WithCancel(ctxT(t))
	cancel()
	if err := r.(topology.EndPinner).PinEnd(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("PinEnd under a cancelled context = %v, want an error wrapping context.Canceled", err)
	}
	buf := make([]topology.Letter[string], 2)
	if n, err := r.TryReceive(ctxT(t), buf); n != 0 || err != nil {
		t.Fatalf("TryReceive on the empty DLQ returned %d letters (%v), %v; want 0, nil", n, buf[:n], err)
	}
	if err := q.DeadLetter(ctxT(t), topology.Letter[string]{Value: "after", Death: &topology.Death{Reason: topology.ReasonRejected}}); err != nil {
		t.Fatal(err)
	}
	n, err := r.TryReceive(ctxT(t), buf)
	if err != nil || n != 1 || buf[0].Value != "after" {
		t.Fatalf("TryReceive after a PinEnd that failed and a catch-up returned %d letters (%v), %v; want [after]", n, buf[:n], err)
	}
	if err := r.Settle(ctxT(t), &buf[0]); err != nil {
		t.Errorf("Settle: %v", err)
	}
}
