package config_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
)

// Build reports at most MaxListedErrors problems in its message, then
// counts the rest, and unwraps to every one of them.
func TestBuildListsAtMostMaxListedErrors(t *testing.T) {
	var doc strings.Builder
	doc.WriteString("topics:\n")
	n := config.MaxListedErrors + 2
	for i := range n {
		fmt.Fprintf(&doc, "  t%02d: {backend: missing}\n", i)
	}
	plan, err := config.Resolve(mustParse(t, doc.String()), config.Wiring{})
	if err != nil {
		t.Fatal(err)
	}
	broker := topic.NewBroker[int]()
	defer broker.Close()
	_, err = config.Build(broker, plan)
	if err == nil {
		t.Fatal("Build accepted topics on a backend that does not exist")
	}
	msg := err.Error()
	if got := strings.Count(msg, "unsupported backend"); got != config.MaxListedErrors {
		t.Errorf("error lists %d problems, want %d: %s", got, config.MaxListedErrors, msg)
	}
	if !strings.HasSuffix(msg, "; and 2 more") {
		t.Errorf("error %q does not end with the count of the problems left out, \"and 2 more\"", msg)
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != n {
		t.Errorf("error unwraps to %d errors, want all %d", len(joined.Unwrap()), n)
	}
}

// A topic on a connection is checked against the capabilities of the
// backend the connector made: one the backend cannot serve fails with a
// *TopicError naming its declaration, and nothing is created.
func TestBuildChecksTheConnectedBackendsCapabilities(t *testing.T) {
	cfg := mustParse(t, `
connections:
  main: {kind: kafka, brokers: ["kafka:9092"]}
topics:
  orders: {backend: kafka, connection: main}
`)
	plan, err := config.Resolve(cfg, config.Wiring{Pipelines: []config.Pipeline{
		{Name: "reader", Subscribes: []config.Subscribe{{Topic: "orders"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	onlyBroadcast := topic.InMemory[int]{}.Capabilities()
	onlyBroadcast.Modes = []topic.Mode{topic.BroadcastOnly}
	connect := func(context.Context, config.ConnectionSpec) (topic.Backend[int], error) {
		return restricted{"kafka", onlyBroadcast}, nil
	}
	broker := topic.NewBroker[int]()
	defer broker.Close()
	_, err = config.BuildContext(t.Context(), broker, plan, config.BuildOptions[int]{Connect: connect})
	var te *config.TopicError
	if !errors.Is(err, topic.ErrUnsupportedMode) || !errors.As(err, &te) || te.Path != "topics.orders" {
		t.Fatalf("BuildContext = %v, want a *TopicError for topics.orders wrapping ErrUnsupportedMode", err)
	}
	if names := broker.Names(); len(names) != 0 {
		t.Fatalf("topics were created despite the error: %v", names)
	}
}

// A hand-built plan that binds one alias twice in a pipeline fails Build
// with an error naming the pipeline and wrapping topic.ErrAliasExists, and
// Build removes the topics it had created: all or none.
func TestBuildOfAPlanWithADuplicateAliasCreatesNothing(t *testing.T) {
	plan, err := config.Resolve(mustParse(t, threeTopics), config.Wiring{Pipelines: []config.Pipeline{
		{Name: "p", Publishes: []config.Publish{{Topic: "t1"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	bindings := &plan.Pipelines[0].Bindings
	*bindings = append(*bindings, (*bindings)[0])
	broker := topic.NewBroker[int]()
	defer broker.Close()
	if _, err := config.Build(broker, plan); !errors.Is(err, topic.ErrAliasExists) || !strings.Contains(err.Error(), "pipeline p") {
		t.Fatalf("Build = %v, want an error naming pipeline p and wrapping topic.ErrAliasExists", err)
	}
	if names := broker.Names(); len(names) != 0 {
		t.Fatalf("broker holds %v after a failed Build, want no topic", names)
	}
}

// Subscriptions lists the topics a pipeline subscribes to, not those it
// publishes into, and returns a copy the caller may change.
func TestSubscriptionsListOnlyTheSubscribedTopics(t *testing.T) {
	w := config.Wiring{Pipelines: []config.Pipeline{
		{Name: "p", Subscribes: []config.Subscribe{{Topic: "t1"}}, Publishes: []config.Publish{{Topic: "t2"}}},
	}}
	broker := topic.NewBroker[int]()
	defer broker.Close()
	wired, err := config.Load(yamlDoc(threeTopics), w, broker)
	if err != nil {
		t.Fatal(err)
	}
	subs := wired.Subscriptions("p")
	if len(subs) != 1 || subs[0].Alias != "t1" {
		t.Fatalf("Subscriptions(p) = %+v, want only t1", subs)
	}
	subs[0].Alias = "changed"
	if again := wired.Subscriptions("p"); again[0].Alias != "t1" {
		t.Fatalf("changing the result of Subscriptions changed a later one: %+v", again)
	}
}

// closeGate is a backend whose topics' Close waits for release.
type closeGate struct {
	topic.InMemory[int]
	release chan struct{}
}

func (g closeGate) Name() string { return "gated" }

func (g closeGate) NewTopic(ctx context.Context, name topic.Name, o topic.Options) (topic.State[int], error) {
	s, err := g.InMemory.NewTopic(ctx, name, o)
	return gatedState{s, g.release}, err
}

type gatedState struct {
	topic.State[int]
	release chan struct{}
}

func (s gatedState) Close() {
	<-s.release
	s.State.Close()
}

// Wired.Close returns when its context ends, with an error wrapping the
// context's, while a topic is still closing; a later Close waits for the
// same closing and returns nil once it is done.
func TestWiredCloseReportsTheContextEndingBeforeTheTopicsClose(t *testing.T) {
	gate := closeGate{release: make(chan struct{})}
	plan, err := config.Resolve(mustParse(t, `
topics:
  slow: {backend: gated}
`), config.Wiring{})
	if err != nil {
		t.Fatal(err)
	}
	broker := topic.NewBroker[int]()
	defer broker.Close()
	release := sync.OnceFunc(func() { close(gate.release) })
	defer release() // before broker.Close, which closes the topic too
	w, err := config.Build(broker, plan, gate)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := w.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close with its context ended while a topic closes = %v, want an error wrapping context.Canceled", err)
	}
	release()
	if err := w.Close(t.Context()); err != nil {
		t.Fatalf("a later Close = %v, want nil", err)
	}
}

// customMemory is an in-memory backend under a name of its own.
type customMemory struct{ topic.InMemory[int] }

func (customMemory) Name() string { return "custom" }

// A nil entry among the backends given to Build is skipped: the others
// are still found by name.
func TestBuildSkipsANilBackend(t *testing.T) {
	plan, err := config.Resolve(mustParse(t, `
topics:
  orders: {backend: custom}
`), config.Wiring{})
	if err != nil {
		t.Fatal(err)
	}
	broker := topic.NewBroker[int]()
	defer broker.Close()
	w, err := config.Build(broker, plan, nil, customMemory{})
	if err != nil {
		t.Fatalf("Build with a nil backend before the one named = %v, want nil", err)
	}
	defer w.Close(t.Context())
	if _, ok := broker.Topic("orders"); !ok {
		t.Error("topic orders was not created on the custom backend")
	}
}

// Wired.Close is safe for concurrent use: Closes called together while a
// topic is still closing all wait for the same closing, each returns nil
// once it is done, and each closes the connected backends.
func TestConcurrentWiredClosesAllReturnOnceTheTopicsAreClosed(t *testing.T) {
	plan, err := config.Resolve(mustParse(t, connectedDoc+`
  slow: {backend: gated}
`), config.Wiring{})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		gate := closeGate{release: make(chan struct{})}
		var closed atomic.Int32
		connect := func(_ context.Context, c config.ConnectionSpec) (topic.Backend[int], error) {
			return fakeBackend{name: c.Kind, closed: &closed}, nil
		}
		broker := topic.NewBroker[int]()
		w, err := config.BuildContext(t.Context(), broker, plan, config.BuildOptions[int]{Backends: []topic.Backend[int]{gate}, Connect: connect})
		if err != nil {
			t.Fatal(err)
		}
		const closers = 4
		errs := wait.Together(closers, func() error { return w.Close(t.Context()) })
		close(gate.release)
		for range closers {
			if err := <-errs; err != nil {
				t.Fatalf("a Close called with others = %v, want nil", err)
			}
		}
		if got := closed.Load(); got != 2*closers {
			t.Fatalf("the connected backends were closed %d times, want %d: each Close closes both", got, 2*closers)
		}
		if err := w.Topics["slow"].Publish(t.Context(), 1); !errors.Is(err, topic.ErrTopicClosed) {
			t.Fatalf("Publish after the Closes returned = %v, want topic.ErrTopicClosed", err)
		}
		broker.Close()
	}
}

// Build's error for problems of several kinds matches each one's sentinel
// with errors.Is, and errors.As finds a *TopicError and an
// *topic.UnsupportedError in it.
func TestBuildsJoinedErrorMatchesTheSentinelOfEveryProblem(t *testing.T) {
	plan, err := config.Resolve(mustParse(t, `
connections:
  main: {kind: kafka, brokers: ["kafka:9092"]}
topics:
  lost: {backend: missing}
  narrow: {backend: narrow}
  remote: {backend: kafka, connection: main}
`), config.Wiring{})
	if err != nil {
		t.Fatal(err)
	}
	noPropagation := topic.InMemory[int]{}.Capabilities()
	noPropagation.Propagation = nil
	broker := topic.NewBroker[int]()
	defer broker.Close()
	_, err = config.BuildContext(t.Context(), broker, plan, config.BuildOptions[int]{
		Backends: []topic.Backend[int]{restricted{"narrow", noPropagation}},
	})
	for _, want := range []error{topic.ErrUnsupportedBackend, topic.ErrUnsupportedPolicy, config.ErrNoConnector} {
		if !errors.Is(err, want) {
			t.Errorf("BuildContext = %v, want it to match %v", err, want)
		}
	}
	var te *config.TopicError
	var ue *topic.UnsupportedError
	if !errors.As(err, &te) || !errors.As(err, &ue) {
		t.Errorf("BuildContext = %v, want a *config.TopicError and a *topic.UnsupportedError in it", err)
	}
}
