package sink_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

// A tracked publish left unhandled by a shutdown is reported upstream as a
// failure asking for a retry, never as handled or as a failure the source
// may commit past; any other failure keeps the source's default policy.
func TestUnhandledByShutdownIsRetried(t *testing.T) {
	errBad := errors.New("bad record")
	cases := []struct {
		name string
		// settle makes the publish of value 1 resolve, given the subscription
		// that received it.
		settle      func(t *testing.T, h *topic.Handle[int], sub *topic.Subscription[int], s *sink.Sink[int], it topic.Item[int])
		wrap        []error // what the upstream error must wrap
		disposition acker.Disposition
		interrupted bool
		text        string // the upstream error's text, when set
	}{
		{
			name: "downstream handler interrupted",
			settle: func(t *testing.T, _ *topic.Handle[int], sub *topic.Subscription[int], _ *sink.Sink[int], it topic.Item[int]) {
				if err := sub.Nack(it.ID, acker.WrapShutdown(fmt.Errorf("store: %w", context.Canceled))); err != nil {
					t.Fatal(err)
				}
			},
			wrap:        []error{sink.ErrNacked, acker.ErrShutdown, context.Canceled},
			disposition: acker.DispositionRetry, interrupted: true,
		},
		{
			name: "downstream subscription closed before acking",
			settle: func(_ *testing.T, _ *topic.Handle[int], sub *topic.Subscription[int], _ *sink.Sink[int], _ topic.Item[int]) {
				sub.Close()
			},
			wrap:        []error{sink.ErrNacked, topic.ErrDeliveryDropped},
			disposition: acker.DispositionRetry,
		},
		{
			name: "sink closed before the downstream outcome",
			settle: func(_ *testing.T, _ *topic.Handle[int], _ *topic.Subscription[int], s *sink.Sink[int], _ topic.Item[int]) {
				s.Close()
			},
			wrap:        []error{sink.ErrClosed, topic.ErrPublisherClosed, acker.ErrShutdown},
			disposition: acker.DispositionRetry, interrupted: true,
			text: "acker: interrupted by the pipeline's shutdown: topic t: closed before the downstream outcome: topic: tracked publisher closed",
		},
		{
			name: "downstream nacked",
			settle: func(t *testing.T, _ *topic.Handle[int], sub *topic.Subscription[int], _ *sink.Sink[int], it topic.Item[int]) {
				if err := sub.Nack(it.ID, errBad); err != nil {
					t.Fatal(err)
				}
			},
			wrap:        []error{sink.ErrNacked, errBad},
			disposition: acker.DispositionDefault,
		},
		{
			name: "topic closed",
			settle: func(_ *testing.T, h *topic.Handle[int], _ *topic.Subscription[int], _ *sink.Sink[int], _ topic.Item[int]) {
				h.Close()
			},
			wrap:        []error{sink.ErrClosed, topic.ErrTopicClosed},
			disposition: acker.DispositionDefault,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, sub, s := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
			rec := acker.NewRecorder(false)
			publishOne(t, s, rec, 1)
			it, err := sub.Receive(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			c.settle(t, h, sub, s, it)
			err = failedWith(t, rec, c.wrap...)
			o := rec.Failed()[0]
			if o.Disposition != c.disposition || acker.Interrupted(o) != c.interrupted {
				t.Fatalf("outcome %v: disposition %v, interrupted %v; want %v, %v",
					err, o.Disposition, acker.Interrupted(o), c.disposition, c.interrupted)
			}
			if c.text != "" && err.Error() != c.text {
				t.Fatalf("upstream error %q, want %q", err, c.text)
			}
		})
	}
}

// A batch whose publishes a Drain gives up on (its context ends, as the
// pipeline's shutdown timeout ends it) is reported upstream as interrupted
// and retried, in one Ack call.
func TestDrainDeadlineRetriesBatch(t *testing.T) {
	_, _, s := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
	rec := acker.NewRecorder(false)
	batch := []*message.Message[int]{message.New(1, rec, 1), message.New(2, rec, 2), message.New(3, rec, 3)}
	if err := s.PublishBatch(ctxT(t), batch); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := s.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain = %v, want the drain cut short", err)
	}
	if err := rec.Wait(ctxT(t), 3); err != nil {
		t.Fatal(err)
	}
	if len(rec.Calls()) != 1 || rec.FailedCount() != 3 {
		t.Fatalf("calls %+v, want one call with three failures", rec.Calls())
	}
	for _, o := range rec.Failed() {
		if !acker.Interrupted(o) || o.Disposition != acker.DispositionRetry {
			t.Fatalf("outcome %d: %v (disposition %v), want interrupted and retried", o.ID, o.Err, o.Disposition)
		}
	}
}

// ctxBoundAcker is an upstream acknowledger whose Ack blocks until its
// context ends (as one committing offsets may), or until release closes.
type ctxBoundAcker struct {
	release <-chan struct{}
	calls   chan error // what each Ack's wait ended with
}

func (a *ctxBoundAcker) Ack(ctx context.Context, _, _ []acker.Outcome) {
	select {
	case <-ctx.Done():
		a.calls <- ctx.Err()
	case <-a.release:
		a.calls <- nil
	}
}

// The Acks a Drain makes for the publishes it gives up on get a context
// that ends with the Drain's: an acknowledger that blocks until its context
// ends does not keep Drain from returning past its deadline, and has
// returned when Drain does.
func TestDrainReturnsByItsDeadlineWhenTheUpstreamAckBlocksOnItsContext(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	up := &ctxBoundAcker{release: release, calls: make(chan error, 1)}
	drainPastDeadline(t, up, "the upstream Ack for the publish it gave up on got a context that never ends")
	select {
	case err := <-up.calls:
		if err == nil {
			t.Fatal("the upstream Ack returned only when released, not when its context ended")
		}
	default:
		t.Fatal("Drain returned before the upstream Ack for the publish it gave up on had returned")
	}
}

// ctxIgnoringAcker is an upstream acknowledger whose Ack ignores its
// context and blocks until release closes.
type ctxIgnoringAcker struct{ release <-chan struct{} }

func (a ctxIgnoringAcker) Ack(context.Context, []acker.Outcome, []acker.Outcome) { <-a.release }

// Drain returns by its deadline (plus DrainGrace), with the context's
// error, even when the upstream Ack for the publish it gives up on ignores
// its context.
func TestDrainReturnsByItsDeadlineWhenTheUpstreamAckIgnoresItsContext(t *testing.T) {
	release := make(chan struct{})
	// Before the sink's cleanup, whose Close would otherwise wait for the
	// Ack when Drain's has not started it yet.
	defer close(release)
	drainPastDeadline(t, ctxIgnoringAcker{release: release}, "it waits for an upstream Ack that ignores its context")
}

// drainPastDeadline publishes a message acknowledged upstream by up on a
// sink nobody consumes, drains the sink with a 10ms deadline and fails t
// unless Drain returns, cut short, within 5s (why says what a late
// return means).
func drainPastDeadline(t *testing.T, up acker.Acknowledger, why string) {
	t.Helper()
	_, _, s := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
	if err := s.Publish(ctxT(t), message.New(1, up, 1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	drained := make(chan error, 1)
	go func() { drained <- s.Drain(ctx) }()
	select {
	case err := <-drained:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Drain = %v, want the drain cut short", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return 5s after its deadline: " + why)
	}
}
