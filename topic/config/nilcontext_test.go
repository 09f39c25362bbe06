package config_test

import (
	"context"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/within"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
)

// Guarantee: BuildContext, LoadContext and Wired.Close return an error
// matching topic.ErrNilContext for a nil context, rather than panicking:
// no topic is registered, and Close leaves the wiring open, its topics
// registered, to be closed again with a context.
func TestANilContextIsAnErrorNotAPanic(t *testing.T) {
	var nilCtx context.Context
	w := config.Wiring{Pipelines: []config.Pipeline{
		{Name: "p", Subscribes: []config.Subscribe{{Topic: "t1"}}, Publishes: []config.Publish{{Topic: "t2"}}},
	}}
	cfg, err := config.Parse(yamlDoc(threeTopics))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := config.Resolve(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	empty := topic.NewBroker[int]()
	defer empty.Close()
	broker := topic.NewBroker[int]()
	defer broker.Close()
	wired, err := config.Build(broker, plan)
	if err != nil {
		t.Fatal(err)
	}
	defer wired.Close(context.Background())
	registered := len(broker.Names())
	calls := []within.Call{
		{Name: "BuildContext", F: func() error {
			_, err := config.BuildContext(nilCtx, empty, plan, config.BuildOptions[int]{})
			return err
		}},
		{Name: "LoadContext", F: func() error {
			_, err := config.LoadContext(nilCtx, yamlDoc(threeTopics), w, empty, config.BuildOptions[int]{})
			return err
		}},
		{Name: "Wired.Close", F: func() error { return wired.Close(nilCtx) }},
	}
	within.Refused(t, 5*time.Second, topic.ErrNilContext, calls...)
	if names := empty.Names(); len(names) != 0 {
		t.Errorf("topics registered by the nil-context builds: %v, want none", names)
	}
	if n := len(broker.Names()); n != registered {
		t.Errorf("%d topics registered after Close(nil), want the %d before", n, registered)
	}
}
