package config_test

import (
	"fmt"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
)

// Load parses topic declarations, infers each topic's mode from the wiring
// and creates the topics; each pipeline gets a topic set.
func ExampleLoad() {
	doc := []byte(`
topics:
  ingress:
    policies:
      balanced: {queue_capacity: 128}
      ack_propagation: {mode: auto, timeout: 10s}
  audit:
    policies:
      broadcast: {on_lag: disconnect, ack_mode: all}
      ack_propagation: {mode: auto}
`)
	wiring := config.Wiring{Pipelines: []config.Pipeline{
		{Name: "gateway", Publishes: []config.Publish{{Topic: "ingress", QueueOnFull: "drop_newest"}}},
		{Name: "workers", Subscribes: []config.Subscribe{{Topic: "ingress"}}, Publishes: []config.Publish{{Topic: "audit"}}},
		{Name: "archive", Subscribes: []config.Subscribe{{Topic: "audit", Mode: config.Broadcast}}},
	}}
	broker := topic.NewBroker[string]()
	defer broker.Close()
	wired, err := config.Load(doc, wiring, broker)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range broker.Names() {
		h, _ := broker.Topic(name)
		fmt.Println(name, h.Options().Mode)
	}
	b, _ := wired.TopicSet("gateway").Get("ingress")
	fmt.Println("gateway → ingress:", b.OnFull, b.AckPropagation.Mode, b.AckPropagation.Timeout)
	// Output:
	// audit broadcast_only
	// ingress balanced_only
	// gateway → ingress: drop_newest auto 10s
}

// A wiring in which messages could come back to where they started is
// rejected, naming the loop.
func ExampleResolve_cycle() {
	cfg, _ := config.Parse([]byte("topics: {t1: {}, t2: {}}"))
	_, err := config.Resolve(cfg, config.Wiring{Pipelines: []config.Pipeline{
		{Name: "a", Publishes: []config.Publish{{Topic: "t1"}}, Subscribes: []config.Subscribe{{Topic: "t2"}}},
		{Name: "b", Publishes: []config.Publish{{Topic: "t2"}}, Subscribes: []config.Subscribe{{Topic: "t1"}}},
	}})
	fmt.Println(err)
	// Output:
	// config: wiring cycle: pipeline a → topic t1 → pipeline b → topic t2 → pipeline a
}

// Parse names the YAML path and the rule of every problem.
func ExampleParse_invalid() {
	_, err := config.Parse([]byte(`
topics:
  ingress:
    policies:
      balanced: {queue_capacity: 0, on_full: wait}
`))
	fmt.Println(err)
	// Output:
	// invalid options: topics.ingress.policies.balanced.queue_capacity must be ≥ 1; topics.ingress.policies.balanced.on_full must be one of [block drop_newest]
}
