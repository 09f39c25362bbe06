package topictest

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic"
)

// patience bounds every wait for something that must happen; it is generous
// so that a slow, loaded -race run never fails spuriously.
const patience = 20 * time.Second

// quiet is how long a check that something must NOT happen watches for it.
// It can only make such a check pass wrongly, never fail wrongly.
const quiet = 30 * time.Millisecond

type suite struct {
	t       *testing.T
	backend topic.Backend[int]
	broker  *topic.Broker[int]
	skips   *skips
}

func newSuite(t *testing.T, newBackend func(*testing.T) topic.Backend[int], rec *skips) *suite {
	t.Helper()
	s := &suite{t: t, backend: newBackend(t), broker: topic.NewBroker[int](), skips: rec}
	t.Cleanup(s.broker.Close)
	return s
}

// skip skips the subtest for the capability named what (as [unsupported]
// names it), recording it for SkipsMatchCapabilities.
func (s *suite) skip(what string) {
	s.t.Helper()
	s.skips.mu.Lock()
	for _, w := range strings.Split(what, ", ") {
		s.skips.seen[w] = true
	}
	s.skips.mu.Unlock()
	s.t.Skipf("backend %q does not declare %s", s.backend.Name(), what)
}

// skipUnsupported skips the subtest if err says the backend does not
// support a setting (a declared limitation, not a failure).
func (s *suite) skipUnsupported(err error) {
	s.t.Helper()
	var ue *topic.UnsupportedError
	if errors.As(err, &ue) && ue.What != "" {
		s.skip(ue.What + " " + ue.Value)
	}
}

// topic creates a topic, skipping the test if the backend declares it does
// not support the options. Every unsupported setting of o is recorded, not
// only the first, so that SkipsMatchCapabilities sees each one.
func (s *suite) topic(name string, o topic.Options) *topic.Handle[int] {
	s.t.Helper()
	o = o.WithDefaults()
	if missing := unsupportedIn(s.backend.Capabilities(), o); len(missing) > 0 {
		s.skip(strings.Join(missing, ", "))
	}
	h, err := s.broker.CreateTopic(topic.Name(name), o, s.backend)
	if err != nil {
		s.t.Fatalf("CreateTopic(%s): %v", name, err)
	}
	return h
}

func (s *suite) sub(h *topic.Handle[int], mode topic.SubscriptionMode) *topic.Subscription[int] {
	s.t.Helper()
	sub, err := h.Subscribe(s.t.Context(), mode, topic.SubscriberOptions{})
	if err != nil {
		s.t.Fatalf("Subscribe: %v", err)
	}
	s.t.Cleanup(sub.Close)
	return sub
}

func (s *suite) tracked(h *topic.Handle[int], o topic.TrackedOptions) *topic.TrackedPublisher[int] {
	s.t.Helper()
	p, err := h.Tracked(o)
	s.skipUnsupported(err)
	if err != nil {
		s.t.Fatalf("Tracked: %v", err)
	}
	s.t.Cleanup(p.Close)
	return p
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

func publish(t *testing.T, h *topic.Handle[int], vs ...int) {
	t.Helper()
	for _, v := range vs {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatalf("Publish(%d): %v", v, err)
		}
	}
}

// recv receives one item, failing the test if none arrives in time.
func recv(t *testing.T, sub *topic.Subscription[int]) topic.Item[int] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	it, err := sub.Receive(ctx)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return it
}

// recvValue receives one message (not a lag notice) and checks its value.
func recvValue(t *testing.T, sub *topic.Subscription[int], want int) topic.Item[int] {
	t.Helper()
	it := recv(t, sub)
	if it.Lagged != 0 || it.Value != want {
		t.Fatalf("received %+v, want value %d", it, want)
	}
	return it
}

// recvNothing checks that no item arrives for a short while.
func recvNothing(t *testing.T, sub *topic.Subscription[int]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	defer cancel()
	it, err := sub.Receive(ctx)
	if err == nil {
		t.Fatalf("received %+v, want nothing", it)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive: %v, want nothing pending", err)
	}
}

// recvClosed checks that the subscription reports closed.
func recvClosed(t *testing.T, sub *topic.Subscription[int]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	it, err := sub.Receive(ctx)
	if !errors.Is(err, topic.ErrSubscriptionClosed) {
		t.Fatalf("Receive = %+v, %v; want ErrSubscriptionClosed", it, err)
	}
}

// waitReceipt returns the receipt's result, failing the test if it takes too long.
func waitReceipt(t *testing.T, r *topic.Receipt) topic.Result {
	t.Helper()
	res, err := r.Wait(ctxT(t))
	if err != nil {
		t.Fatalf("receipt never resolved: %v", err)
	}
	return res
}

func pending(t *testing.T, r *topic.Receipt) {
	t.Helper()
	if res, ok := r.Result(); ok {
		t.Fatalf("receipt resolved as %v (%v), want still pending", res.Outcome, res.Reason)
	}
}

func expectResult(t *testing.T, r *topic.Receipt, want topic.ReceiptOutcome, reason error) {
	t.Helper()
	res := waitReceipt(t, r)
	if res.Outcome != want {
		t.Fatalf("outcome %v (reason %v), want %v", res.Outcome, res.Reason, want)
	}
	if reason != nil && !errors.Is(res.Reason, reason) {
		t.Fatalf("reason %v, want %v", res.Reason, reason)
	}
}

func isErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

func balanced(capacity int) topic.Options {
	return topic.Options{Mode: topic.BalancedOnly, Balanced: topic.BalancedPolicy{Capacity: capacity}}
}

func broadcast(capacity int, onLag topic.OnLag) topic.Options {
	return topic.Options{Mode: topic.BroadcastOnly, Broadcast: topic.BroadcastPolicy{Capacity: capacity, OnLag: onLag}}
}

func mixed(bcap, rcap int) topic.Options {
	return topic.Options{Mode: topic.Mixed, Balanced: topic.BalancedPolicy{Capacity: bcap},
		Broadcast: topic.BroadcastPolicy{Capacity: rcap}}
}

func ackAll(capacity int) topic.Options {
	return topic.Options{
		Mode:           topic.BroadcastOnly,
		Broadcast:      topic.BroadcastPolicy{Capacity: capacity, OnLag: topic.Disconnect, AckMode: topic.AckAll},
		AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto},
	}
}

func group(s string) topic.SubscriptionMode { return topic.Balanced(topic.GroupName(s)) }

// drainThenClosed receives from a closed topic's subscription: a prefix of
// want, in order, then ErrSubscriptionClosed.
func drainThenClosed(t *testing.T, sub *topic.Subscription[int], want ...int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	for i := 0; ; i++ {
		it, err := sub.Receive(ctx)
		if errors.Is(err, topic.ErrSubscriptionClosed) {
			return
		}
		if err != nil {
			t.Fatalf("Receive after Close: %v, want ErrSubscriptionClosed", err)
		}
		if i >= len(want) || it.Lagged != 0 || it.Value != want[i] {
			t.Fatalf("received %+v after Close, want a prefix of %v then ErrSubscriptionClosed", it, want)
		}
	}
}

// PanickingCodec is Codec, except that it panics with the error where
// Codec returns one: for tests of how a backend contains a codec's panic.
type PanickingCodec[T any] struct{ Codec topic.Codec[T] }

// Encode implements topic.Codec.
func (c PanickingCodec[T]) Encode(v T) ([]byte, error) {
	b, err := c.Codec.Encode(v)
	if err != nil {
		panic(err)
	}
	return b, nil
}

// Decode implements topic.Codec.
func (c PanickingCodec[T]) Decode(b []byte) (T, error) {
	v, err := c.Codec.Decode(b)
	if err != nil {
		panic(err)
	}
	return v, nil
}

// ExitingCodec is Codec, except that it ends its goroutine with
// runtime.Goexit (as t.FailNow does) where Codec returns an error: for
// tests of how a backend contains a codec's exit.
type ExitingCodec[T any] struct{ Codec topic.Codec[T] }

// Encode implements topic.Codec.
func (c ExitingCodec[T]) Encode(v T) ([]byte, error) {
	b, err := c.Codec.Encode(v)
	if err != nil {
		runtime.Goexit()
	}
	return b, nil
}

// Decode implements topic.Codec.
func (c ExitingCodec[T]) Decode(b []byte) (T, error) {
	v, err := c.Codec.Decode(b)
	if err != nil {
		runtime.Goexit()
	}
	return v, nil
}
