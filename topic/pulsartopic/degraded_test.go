package pulsartopic_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/readertest"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// Guarantee: a pipeline reading a Pulsar topic through topic/source, as a
// balanced member or as a broadcast subscriber, has its stage degraded
// while its consumer cannot reconnect to the broker, which went away,
// with an error wrapping sources/pulsar's ErrReconnecting as LastError,
// and running again once the broker is back and the consumer
// reconnected, within the same run (no restart); every message published
// before and after the outage is handled. How long each change takes is
// logged, not bounded (docs/testing.md): about two operation timeouts
// (1 s here) to degrade.
func TestTopicSourceIsDegradedWhileTheBrokerIsAway(t *testing.T) {
	for name, mode := range readertest.Modes() {
		t.Run(name, func(t *testing.T) {
			away := startAwayBroker(t)
			be := newBackend(t, away.options())
			h := newHandle(t, be, "away", topic.Options{Mode: topic.Mixed})
			r := readertest.Start(t, "away", h, mode, testbroker.PulsarLogger())
			status, state, count := r.Status, r.String, r.Handled
			const n = 20
			for v := range n / 2 {
				if err := h.Publish(ctxT(t), v); err != nil {
					t.Fatal(err)
				}
			}
			wait.Within(t, patience, "the messages published before the outage", func() bool {
				return count() == n/2 && status().State == producer.StateRunning
			}, state)

			away.stop(t)
			down := time.Now()
			wait.Within(t, patience, "the stage degraded", func() bool { return status().State == producer.StateDegraded }, state)
			st := status()
			t.Logf("degraded %v after the broker went away: %v", st.Since.Sub(down).Round(time.Millisecond), st.LastError)
			if !errors.Is(st.LastError, spulsar.ErrReconnecting) || st.Restarts != 0 {
				t.Fatalf("status %+v, want degraded with ErrReconnecting in the first run", st)
			}

			away.restart(t)
			back := time.Now()
			wait.Within(t, patience, "the stage running again", func() bool { return status().State == producer.StateRunning }, state)
			st = status()
			t.Logf("running %v after the broker came back", st.Since.Sub(back).Round(time.Millisecond))
			if st.Restarts != 0 {
				t.Fatalf("status %+v, want the first run still", st)
			}
			// Published through the broker's API: the backend's producer
			// reconnects meanwhile, and pulsar-client-go's producer races in
			// its reconnect path when it sends while reconnecting.
			codec := topic.IntCodec{}
			for v := n / 2; v < n; v++ {
				payload, _ := codec.Encode(v)
				if _, err := away.br.Publish(ctxT(t), be.TopicName("away"), pulsartest.Message{Payload: payload}); err != nil {
					t.Fatal(err)
				}
			}
			wait.Within(t, patience, "every message handled", func() bool { return count() == n }, state)
		})
	}
}

// Guarantee: a subscription's Reach observer that panics or ends its
// goroutine, called on the client's goroutines while its consumer cannot
// reconnect and once it has, costs an error line each time: the process
// goes on, and the subscription receives what is published once the
// broker is back.
func TestAReachObserverThatPanicsOrExitsLeavesTheSubscriptionReading(t *testing.T) {
	away := startAwayBroker(t)
	o := away.options()
	var lines logtest.Lines
	o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
	be := newBackend(t, o)
	h := newHandle(t, be, "reach", topic.Options{})
	obs := &readertest.MisbehavingReach{}
	s, err := h.Subscribe(ctxT(t), topic.Balanced("g"), topic.SubscriberOptions{Reach: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	away.stop(t)
	wait.Within(t, patience, "a degrade reported", func() bool { return obs.Degrades.Load() > 0 })
	away.restart(t)
	wait.Within(t, patience, "a recovery reported", func() bool { return obs.Recoveries.Load() > 0 })
	payload, _ := topic.IntCodec{}.Encode(7)
	if _, err := away.br.Publish(ctxT(t), be.TopicName("reach"), pulsartest.Message{Payload: payload}); err != nil {
		t.Fatal(err)
	}
	it, err := s.Receive(ctxT(t))
	if err != nil || it.Value != 7 {
		t.Fatalf("Receive after the observer misbehaved = %+v, %v; want 7", it, err)
	}
	if lines.Count("Reach observer panicked") == 0 || lines.Count("Reach observer ended its goroutine") == 0 {
		t.Fatalf("want error lines for the panic and the exit, got %q", lines.Matching("Reach observer"))
	}
}

// awayBroker is a broker that a test stops and starts again at the same
// address; whichever listens last is closed once the test ends.
type awayBroker struct {
	br   *pulsartest.Broker
	addr string
}

func startAwayBroker(t *testing.T) *awayBroker {
	t.Helper()
	a := &awayBroker{}
	a.restart(t)
	t.Cleanup(func() { _ = a.br.Close() })
	return a
}

// options are the backend's test options on a, whose operations time out
// after a second.
func (a *awayBroker) options() pulsartopic.Options[int] {
	o := testOptions[int](a.br, topic.IntCodec{})
	o.ClientOptions.OperationTimeout = time.Second
	return o
}

func (a *awayBroker) stop(t *testing.T) {
	t.Helper()
	a.addr = a.br.Addr().String()
	if err := a.br.Close(); err != nil {
		t.Fatal(err)
	}
}

// restart starts the broker, at the address it had when it stopped.
func (a *awayBroker) restart(t *testing.T) {
	t.Helper()
	br, err := pulsartest.Start(context.Background(), pulsartest.Options{Addr: a.addr, Logger: testbroker.PulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	a.br = br
}
