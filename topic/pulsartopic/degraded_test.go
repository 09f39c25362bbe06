package pulsartopic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/readertest"
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
			br, err := pulsartest.Start(context.Background(), pulsartest.Options{Logger: testbroker.PulsarLogger()})
			if err != nil {
				t.Fatal(err)
			}
			// Whichever broker listens last, closed once the backend is.
			t.Cleanup(func() { _ = br.Close() })
			o := testOptions[int](br, topic.IntCodec{})
			o.ClientOptions.OperationTimeout = time.Second
			be := newBackend(t, o)
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

			addr := br.Addr().String()
			if err := br.Close(); err != nil {
				t.Fatal(err)
			}
			down := time.Now()
			wait.Within(t, patience, "the stage degraded", func() bool { return status().State == producer.StateDegraded }, state)
			st := status()
			t.Logf("degraded %v after the broker went away: %v", st.Since.Sub(down).Round(time.Millisecond), st.LastError)
			if !errors.Is(st.LastError, spulsar.ErrReconnecting) || st.Restarts != 0 {
				t.Fatalf("status %+v, want degraded with ErrReconnecting in the first run", st)
			}

			br, err = pulsartest.Start(context.Background(), pulsartest.Options{Addr: addr, Logger: testbroker.PulsarLogger()})
			if err != nil {
				t.Fatal(err)
			}
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
				if _, err := br.Publish(ctxT(t), be.TopicName("away"), pulsartest.Message{Payload: payload}); err != nil {
					t.Fatal(err)
				}
			}
			wait.Within(t, patience, "every message handled", func() bool { return count() == n }, state)
		})
	}
}
