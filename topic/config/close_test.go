package config_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// Guarantee: Wired.Close returns by its context's deadline, with an error
// wrapping ctx.Err(), when closing a topic waits on a Kafka cluster that
// stopped answering (a group member's leave, which kafkatopic bounds only
// by AdminTimeout, here far beyond the deadline); it closes the backends
// with its context all the same, which cuts their connections, so that
// the closing of the topics ends soon after: a later Close returns nil.
func TestWiredCloseReturnsByItsDeadlineWhenTheClusterHangs(t *testing.T) {
	c := testbroker.Kafka(t)
	plan := kafkaOrdersPlan(t, c, config.Pipeline{Name: "reader", Subscribes: []config.Subscribe{{Topic: "orders"}}})
	var backend *kafkatopic.Backend[int]
	connect := func(_ context.Context, spec config.ConnectionSpec) (topic.Backend[int], error) {
		b, err := kafkatopic.New(kafkatopic.Options[int]{
			Brokers:      spec.Brokers,
			Config:       testbroker.SaramaConfig(),
			Codec:        topic.IntCodec{},
			AdminTimeout: 2 * time.Minute,
			Logger:       slog.New(slog.DiscardHandler),
		})
		backend = b
		return b, err
	}
	broker := topic.NewBroker[int]()
	defer broker.Close()
	w, err := config.BuildContext(t.Context(), broker, plan, config.BuildOptions[int]{Connect: connect})
	if err != nil {
		t.Fatal(err)
	}
	s := w.Subscriptions("reader")[0]
	sub, err := s.Binding.Handle.Subscribe(t.Context(), s.Mode, topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testbroker.HangKafka(t, c)

	if !testbroker.ReturnsByDeadline(t, "Close", w.Close) {
		// Cut the backend's connections, so that the closing ends before
		// the test does.
		bctx, bcancel := context.WithTimeout(context.Background(), time.Second)
		defer bcancel()
		_ = backend.Close(bctx)
	}
	later, lcancel := context.WithTimeout(context.Background(), testbroker.HungGrace)
	defer lcancel()
	if err := w.Close(later); err != nil {
		t.Errorf("a later Close = %v, want nil: the closing cut short at the deadline still runs %v later", err, testbroker.HungGrace)
	}
	sub.Close()
}

// kafkaOrdersPlan resolves a document with one topic, orders, on a Kafka
// connection main to c, for pipelines.
func kafkaOrdersPlan(t *testing.T, c *kfake.Cluster, pipelines ...config.Pipeline) *config.Plan {
	t.Helper()
	cfg := mustParse(t, `
connections:
  main:
    kind: kafka
    brokers: [`+c.ListenAddrs()[0]+`]
topics:
  orders:
    backend: kafka
    connection: main
`)
	plan, err := config.Resolve(cfg, config.Wiring{Pipelines: pipelines})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}
