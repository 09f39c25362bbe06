package connector_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/topic/connector"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// Guarantee: Wired.Close closes the connections of every backend the
// connector made, Kafka's and Pulsar's, with what their topics and
// subscriptions opened; and a build that fails after connecting closes
// them too, as it does a backend of another kind than its connection's.
// Many rounds of either leave no connection to the brokers open.
func TestWiredCloseLeavesNoConnectionToTheBrokers(t *testing.T) {
	const rounds = 10
	kc, pb := testbroker.Kafka(t), testbroker.Pulsar(t)
	brokers := append(kc.ListenAddrs(), pb.Addr().String())
	conns := func() int { return testnet.ConnsTo(t, brokers...) }
	conn, err := connector.New(connector.Options[string]{
		Codec:  topic.StringCodec{},
		Logger: slog.New(slog.DiscardHandler),
		Kafka: func(_ config.ConnectionSpec, o *kafkatopic.Options[string]) {
			o.ConnectTimeout, o.AdminTimeout = 5*time.Second, 10*time.Second
		},
		Pulsar: func(_ config.ConnectionSpec, o *pulsartopic.Options[string]) {
			o.ClientOptions.OperationTimeout = 5 * time.Second
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(`
connections:
  main: {kind: kafka, brokers: [` + kc.ListenAddrs()[0] + `]}
  events: {kind: pulsar, service_url: "pulsar://` + pb.Addr().String() + `"}
topics:
  orders: {backend: kafka, connection: main}
  audit: {backend: pulsar, connection: events}
`)
	wiring := config.Wiring{Pipelines: []config.Pipeline{{Name: "p", Subscribes: []config.Subscribe{
		{Topic: "orders", Mode: config.Balanced, ConsumerGroup: "billing"},
		{Topic: "audit", Mode: config.Balanced, ConsumerGroup: "billing"},
	}}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if n := conns(); n != 0 {
		t.Fatalf("%d connections to the brokers before any build", n)
	}
	t.Run("closed", func(t *testing.T) {
		for i := range rounds {
			broker := topic.NewBroker[string]()
			w, err := config.LoadContext(ctx, doc, wiring, broker, config.BuildOptions[string]{Connect: conn})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []topic.Name{"orders", "audit"} {
				h := w.Topics[name]
				if err := h.Publish(ctx, "v"); err != nil {
					t.Fatalf("publishing into %s: %v", name, err)
				}
				s, err := h.Subscribe(ctx, topic.Balanced("billing"), topic.SubscriberOptions{})
				if err != nil {
					t.Fatalf("subscribing to %s: %v", name, err)
				}
				s.Close()
			}
			if conns() == 0 {
				t.Fatal("no connection to the brokers counted while the topics are in use")
			}
			if err := w.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			broker.Close()
			testnet.SettlesAtMost(t, 5*time.Second, fmt.Sprintf("connections to the brokers after %d Wired closed", i+1), 0, conns)
		}
	})
	t.Run("failed build", func(t *testing.T) {
		for i := range rounds {
			broker := topic.NewBroker[string]()
			// A topic of the document's name exists already: creating the
			// topics fails once both backends are made.
			mem, err := topic.BackendByName[string]("in_memory")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := broker.CreateTopic("audit", topic.Options{}, mem); err != nil {
				t.Fatal(err)
			}
			w, err := config.LoadContext(ctx, doc, wiring, broker, config.BuildOptions[string]{Connect: conn})
			if err == nil || w != nil {
				t.Fatalf("LoadContext over an existing topic = %v, %v; want an error", w, err)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			broker.Close()
			testnet.SettlesAtMost(t, 5*time.Second, fmt.Sprintf("connections to the brokers after %d failed builds", i+1), 0, conns)
		}
	})
	t.Run("backend of another kind", func(t *testing.T) {
		// A connector that makes a Kafka backend for the Pulsar
		// connection: the build refuses it, and nothing else closes it.
		wrong := func(ctx context.Context, c config.ConnectionSpec) (topic.Backend[string], error) {
			if c.Kind == config.KindPulsar {
				c.Kind, c.Brokers = config.KindKafka, kc.ListenAddrs()
			}
			return conn(ctx, c)
		}
		for i := range rounds {
			broker := topic.NewBroker[string]()
			if w, err := config.LoadContext(ctx, doc, wiring, broker, config.BuildOptions[string]{Connect: wrong}); err == nil || w != nil {
				t.Fatalf("LoadContext with a backend of another kind = %v, %v; want an error", w, err)
			}
			broker.Close()
			testnet.SettlesAtMost(t, 5*time.Second, fmt.Sprintf("connections to the brokers after %d refused backends", i+1), 0, conns)
		}
	})
}
