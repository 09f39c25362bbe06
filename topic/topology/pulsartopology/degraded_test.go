package pulsartopology_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a pipeline reading a Pulsar topology through a topology
// source, with a group reader or a broadcast reader, has its stage
// degraded while its consumer cannot reconnect to the broker, which went
// away, with an error wrapping sources/pulsar's ErrReconnecting as
// LastError, and running again once the broker is back and the consumer
// reconnected, within the same run (no restart); every letter published
// before and after the outage is handled (see
// topologytest.DegradedWhileAway): about two operation timeouts (1 s
// here) to degrade.
func TestTopologySourceIsDegradedWhileTheBrokerIsAway(t *testing.T) {
	for name, tb := range map[string]*topology.Builder{
		"group":     topology.New("away").DLQ(),
		"broadcast": topology.New("away").Broadcast(),
	} {
		t.Run(name, func(t *testing.T) {
			br, err := pulsartest.Start(context.Background(), pulsartest.Options{Logger: testbroker.PulsarLogger()})
			if err != nil {
				t.Fatal(err)
			}
			// Whichever broker listens last, closed once the backend is.
			t.Cleanup(func() { _ = br.Close() })
			o := options(br, topic.JSONCodec[topologytest.Msg]{})
			o.ClientOptions.OperationTimeout = time.Second
			be := newBackend(t, o)
			top, err := tb.Build()
			if err != nil {
				t.Fatal(err)
			}
			q, err := be.Declare(ctxT(t), top)
			if err != nil {
				t.Fatal(err)
			}
			var addr string
			topologytest.DegradedWhileAway(t, q, time.Minute, topologytest.Outage{
				Away: func(t *testing.T, degraded func() bool, state func() string) {
					addr = br.Addr().String()
					if err := br.Close(); err != nil {
						t.Fatal(err)
					}
					wait.Within(t, time.Minute, "the stage degraded", degraded, state)
				},
				Back: func(t *testing.T) {
					if br, err = pulsartest.Start(context.Background(), pulsartest.Options{Addr: addr, Logger: testbroker.PulsarLogger()}); err != nil {
						t.Fatal(err)
					}
				},
				// Through the broker's API: the backend's producer
				// reconnects meanwhile, and pulsar-client-go's producer
				// races in its reconnect path when it sends while
				// reconnecting.
				PublishAfter: func(t *testing.T, m topologytest.Msg) {
					payload, _ := json.Marshal(m)
					if _, err := br.Publish(ctxT(t), be.TopicName("away"), pulsartest.Message{Payload: payload}); err != nil {
						t.Fatal(err)
					}
				},
				Err: spulsar.ErrReconnecting,
			})
		})
	}
}
