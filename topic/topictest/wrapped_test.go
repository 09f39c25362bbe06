package topictest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topictest"
)

// wrapped is the in-memory backend behind the State interface, declaring
// what a backend on a log would (no feature of the in-memory backend, no
// tracked publishers), with one fault switched on by its name.
type wrapped struct {
	name string
}

func (w wrapped) Name() string { return w.name }

func (w wrapped) Capabilities() topic.Capabilities {
	c := topic.InMemory[int]{}.Capabilities()
	if w.name == "durable-tracked" {
		c.Features = []topic.Feature{topic.FeatureDurable}
		return c
	}
	c.Features = nil
	c.AckModes = []topic.AckMode{topic.AckFirst}
	c.Propagation = []topic.PropagationMode{topic.PropagationDisabled}
	return c
}

func (w wrapped) NewTopic(ctx context.Context, name topic.Name, o topic.Options) (topic.State[int], error) {
	st, err := topic.InMemory[int]{}.NewTopic(ctx, name, o)
	if err != nil {
		return nil, err
	}
	return &wrappedState{State: st, fault: w.name}, nil
}

type wrappedState struct {
	topic.State[int]
	fault string

	mu     sync.Mutex
	hidden []topic.SubscriptionState[int]
	closed bool
}

// TryPublish of "try-publish-loses" reports Published and delivers nothing
// while the topic is open.
func (w *wrappedState) TryPublish(e topic.Envelope[int]) (topic.PublishOutcome, error) {
	w.mu.Lock()
	lose := w.fault == "try-publish-loses" && !w.closed
	w.mu.Unlock()
	if lose {
		return topic.Published, nil
	}
	return w.State.TryPublish(e)
}

// Subscribe of "refused-subscribe-joins" joins a group with an ended
// context anyway, returns the context's error and does not count the
// member it keeps.
func (w *wrappedState) Subscribe(ctx context.Context, mode topic.SubscriptionMode, o topic.SubscriberOptions) (topic.SubscriptionState[int], error) {
	if err := ctx.Err(); err != nil && w.fault == "refused-subscribe-joins" && !mode.IsBroadcast() {
		if sub, serr := w.State.Subscribe(context.WithoutCancel(ctx), mode, o); serr == nil {
			w.mu.Lock()
			w.hidden = append(w.hidden, sub)
			w.mu.Unlock()
		}
		return nil, err
	}
	sub, err := w.State.Subscribe(ctx, mode, o)
	if err != nil || w.fault != "durable-tracked" {
		return sub, err
	}
	return &redelivering{SubscriptionState: sub, received: map[topic.MessageID]topic.Envelope[int]{}}, nil
}

// redelivering makes an in-memory subscription settle its deliveries as a
// durable backend does, within one member: Settle refuses what it did not
// hand out or settled already, and a nacked message comes again, with
// Redeliveries one higher and its ticket, at the member's next Receive.
type redelivering struct {
	topic.SubscriptionState[int]

	mu       sync.Mutex
	received map[topic.MessageID]topic.Envelope[int]
	again    []topic.Envelope[int]
}

func (r *redelivering) Receive(ctx context.Context, dst []topic.Envelope[int]) (int, error) {
	r.mu.Lock()
	n := copy(dst, r.again)
	r.again = r.again[n:]
	r.mu.Unlock()
	if n == 0 {
		var err error
		if n, err = r.SubscriptionState.Receive(ctx, dst); err != nil {
			return n, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range dst[:n] {
		r.received[e.ID] = e
	}
	return n, nil
}

func (r *redelivering) Settle(id topic.MessageID, reason error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.received[id]
	if !ok {
		return topic.ErrMessageNotTracked
	}
	delete(r.received, id)
	if reason != nil {
		e.Redeliveries++
		r.again = append(r.again, e)
	}
	return nil
}

func (w *wrappedState) Stats() topic.StateStats {
	st := w.State.Stats()
	w.mu.Lock()
	st.BalancedGroups -= len(w.hidden)
	w.mu.Unlock()
	return st
}

func (w *wrappedState) Close() {
	w.State.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for _, sub := range w.hidden {
		sub.Close()
	}
}

// wrappedEnv makes TestWrappedBackendConformance run; only the tests below
// set it, for the process they start.
const wrappedEnv = "TOPICTEST_WRAPPED_BACKENDS"

// The suite run against the wrapped backends, by the tests below.
func TestWrappedBackendConformance(t *testing.T) {
	if os.Getenv(wrappedEnv) == "" {
		t.Skip("run by TestSuiteCatchesBrokenBackends and TestTrackedSubtestsPassOnDurableBackend")
	}
	for _, name := range []string{"faithful", "try-publish-loses", "refused-subscribe-joins", "durable-tracked"} {
		t.Run(name, func(t *testing.T) {
			topictest.Run(t, func() topic.Backend[int] { return wrapped{name: name} })
		})
	}
}

// Each fault fails the subtest that checks the guarantee it breaks, which
// the same backend without the fault passes.
func TestSuiteCatchesBrokenBackends(t *testing.T) {
	for _, c := range []struct{ fault, subtest string }{
		{"try-publish-loses", "TryPublishWithRoomDelivers"},
		{"refused-subscribe-joins", "EndedContextSubscribesNothing"},
	} {
		t.Run(c.fault, func(t *testing.T) {
			run := func(backend string) (string, error) {
				cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.v",
					"-test.run=^TestWrappedBackendConformance$/^"+backend+"$/^"+c.subtest+"$")
				cmd.Env = append(os.Environ(), wrappedEnv+"=1")
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			// Without the fault the subtest passes, or skips at its part on
			// tracked publishers, which comes after what the faults break.
			out, err := run("faithful")
			if err != nil || !strings.Contains(out, "=== RUN   TestWrappedBackendConformance/faithful/"+c.subtest) {
				t.Fatalf("the backend without the fault did not pass %s (%v):\n%s", c.subtest, err, out)
			}
			out, err = run(c.fault)
			if err == nil || !strings.Contains(out, "--- FAIL: TestWrappedBackendConformance/"+c.fault+"/"+c.subtest) {
				t.Fatalf("%s passed on a backend whose fault it checks (%v):\n%s", c.subtest, err, out)
			}
		})
	}
}

// The tracked subtests hold on a durable backend that carries tickets: a
// nacked message comes again, a delivery whose publish timed out is still
// the backend's to settle, and a backend without group_backpressure is
// not asked to fill a group's queue.
func TestTrackedSubtestsPassOnDurableBackend(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.v",
		"-test.run=^TestWrappedBackendConformance$/^durable-tracked$/^(TrackedNackWithReason|TrackedTimedOut|TrackedFuncAndClose|DurableNackRedelivers|DurableSettlesUntracked)$")
	cmd.Env = append(os.Environ(), wrappedEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Count(string(out), "--- PASS: TestWrappedBackendConformance/durable-tracked/") != 5 {
		t.Fatalf("the tracked subtests on a durable backend with tracked publishers (%v):\n%s", err, out)
	}
}
