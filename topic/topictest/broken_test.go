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
	return w.State.Subscribe(ctx, mode, o)
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

// brokenEnv makes TestBrokenBackendConformance run; only
// TestSuiteCatchesBrokenBackends sets it, for the process it starts.
const brokenEnv = "TOPICTEST_BROKEN_BACKENDS"

// The suite run against the backends of TestSuiteCatchesBrokenBackends.
func TestBrokenBackendConformance(t *testing.T) {
	if os.Getenv(brokenEnv) == "" {
		t.Skip("run by TestSuiteCatchesBrokenBackends")
	}
	for _, name := range []string{"faithful", "try-publish-loses", "refused-subscribe-joins"} {
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
					"-test.run=^TestBrokenBackendConformance$/^"+backend+"$/^"+c.subtest+"$")
				cmd.Env = append(os.Environ(), brokenEnv+"=1")
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			// Without the fault the subtest passes, or skips at its part on
			// tracked publishers, which comes after what the faults break.
			out, err := run("faithful")
			if err != nil || !strings.Contains(out, "=== RUN   TestBrokenBackendConformance/faithful/"+c.subtest) {
				t.Fatalf("the backend without the fault did not pass %s (%v):\n%s", c.subtest, err, out)
			}
			out, err = run(c.fault)
			if err == nil || !strings.Contains(out, "--- FAIL: TestBrokenBackendConformance/"+c.fault+"/"+c.subtest) {
				t.Fatalf("%s passed on a backend whose fault it checks (%v):\n%s", c.subtest, err, out)
			}
		})
	}
}
