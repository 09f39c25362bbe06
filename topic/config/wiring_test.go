package config_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/validate"
)

func mustParse(t *testing.T, doc string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(yamlDoc(doc))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

const threeTopics = `
topics:
  t1: {}
  t2: {}
  t3: {}
`

// The topic mode is inferred from how pipelines actually subscribe, and
// impl_selection force_mixed overrides the inference.
func TestResolveInfersMode(t *testing.T) {
	cfg := mustParse(t, `
topics:
  work: {}
  fanout: {}
  both: {}
  groups2: {}
  unused: {}
  forced:
    impl_selection: force_mixed
  audit:
    policies:
      broadcast: {on_lag: disconnect, ack_mode: all}
      ack_propagation: {mode: auto}
  unheard:
    policies:
      broadcast: {on_lag: disconnect, ack_mode: all}
      ack_propagation: {mode: auto}
`)
	w := config.Wiring{Pipelines: []config.Pipeline{
		{Name: "src", Publishes: []config.Publish{{Topic: "work"}, {Topic: "fanout"}, {Topic: "both"}, {Topic: "groups2"}, {Topic: "forced"}, {Topic: "audit"}}},
		{Name: "a", Subscribes: []config.Subscribe{
			{Topic: "work"}, {Topic: "fanout", Mode: config.Broadcast}, {Topic: "both"}, {Topic: "groups2"}, {Topic: "forced"}, {Topic: "audit", Mode: config.Broadcast},
		}},
		{Name: "b", Subscribes: []config.Subscribe{
			{Topic: "work"}, {Topic: "fanout", Mode: config.Broadcast}, {Topic: "both", Mode: config.Broadcast}, {Topic: "groups2", ConsumerGroup: "other"},
		}},
	}}
	// "work": pipelines a and b are two different groups (their names), so
	// make b join a's group explicitly.
	w.Pipelines[2].Subscribes[0].ConsumerGroup = "a"
	plan, err := config.Resolve(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	want := map[topic.Name]topic.Mode{
		"work":    topic.BalancedOnly,  // balanced, one group
		"fanout":  topic.BroadcastOnly, // broadcast only
		"both":    topic.Mixed,         // balanced and broadcast
		"groups2": topic.Mixed,         // two balanced groups need the mixed variant
		"unused":  topic.BalancedOnly,  // nobody subscribes
		"forced":  topic.Mixed,         // force_mixed overrides balanced-only
		"audit":   topic.BroadcastOnly,
		"unheard": topic.BroadcastOnly, // nobody subscribes; ack_mode all needs broadcast-only
	}
	if len(plan.Topics) != len(want) {
		t.Fatalf("plan has %d topics, want %d", len(plan.Topics), len(want))
	}
	for _, tp := range plan.Topics {
		if tp.Options.Mode != want[tp.Name] {
			t.Errorf("topic %s: mode %s, want %s", tp.Name, tp.Options.Mode, want[tp.Name])
		}
	}
}

// Resolve rejects every wiring rule with an error naming the wiring path
// (or the topic's YAML path) and the rule.
func TestResolveRejects(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		w    config.Wiring
		want string
	}{
		{"undeclared topic", threeTopics, config.Wiring{Pipelines: []config.Pipeline{
			{Name: "a", Subscribes: []config.Subscribe{{Topic: "nope"}}},
		}}, `wiring.pipelines[0].subscribes[0].topic "nope" is not declared (no topics.nope)`},
		{"undeclared topic in a group", threeTopics, config.Wiring{Pipelines: []config.Pipeline{
			{Name: "a", Group: "g", Publishes: []config.Publish{{Topic: "nope"}}},
		}}, `wiring.pipelines[0].publishes[0].topic "nope" is not declared (no groups.g.topics.nope or topics.nope)`},
		{"unnamed pipeline", threeTopics, config.Wiring{Pipelines: []config.Pipeline{{}}},
			"wiring.pipelines[0].name is required"},
		{"duplicate pipeline", threeTopics, config.Wiring{Pipelines: []config.Pipeline{{Name: "a"}, {Name: "a"}}},
			`wiring.pipelines[1].name must be unique: "a" is already the name of wiring.pipelines[0]`},
		{"missing topic name", threeTopics, config.Wiring{Pipelines: []config.Pipeline{
			{Name: "a", Publishes: []config.Publish{{}}},
		}}, "wiring.pipelines[0].publishes[0].topic is required"},
		{"topic used twice", threeTopics, config.Wiring{Pipelines: []config.Pipeline{
			{Name: "a", Subscribes: []config.Subscribe{{Topic: "t1"}, {Topic: "t1", Mode: config.Broadcast}}},
		}}, `wiring.pipelines[0].subscribes[1].topic "t1" is already used by wiring.pipelines[0].subscribes[0].topic of the same pipeline`},
		{"consumer group on broadcast", threeTopics, config.Wiring{Pipelines: []config.Pipeline{
			{Name: "a", Subscribes: []config.Subscribe{{Topic: "t1", Mode: config.Broadcast, ConsumerGroup: "g"}}},
		}}, "wiring.pipelines[0].subscribes[0].consumer_group must be empty for a broadcast subscription"},
		{"bad pipeline group", threeTopics, config.Wiring{Pipelines: []config.Pipeline{{Name: "a", Group: "a b"}}},
			`wiring.pipelines[0].group "a b" has " " at byte 1; a name is 1 to 249 ASCII letters, digits, '.', '_' or '-'`},
		{"bad subscription mode", threeTopics, config.Wiring{Pipelines: []config.Pipeline{
			{Name: "a", Subscribes: []config.Subscribe{{Topic: "t1", Mode: 7}}},
		}}, "wiring.pipelines[0].subscribes[0].mode must be ≤ 1"},
		{"bad queue_on_full", threeTopics, config.Wiring{Pipelines: []config.Pipeline{
			{Name: "a", Publishes: []config.Publish{{Topic: "t1", QueueOnFull: "wait"}}},
		}}, "wiring.pipelines[0].publishes[0].queue_on_full must be one of [block drop_newest]"},
		{"ack_mode all with a balanced subscriber", `
topics:
  audit:
    policies:
      broadcast: {on_lag: disconnect, ack_mode: all}
      ack_propagation: {mode: auto}
`, config.Wiring{Pipelines: []config.Pipeline{
			{Name: "b", Subscribes: []config.Subscribe{{Topic: "audit", Mode: config.Broadcast}}},
			{Name: "c", Subscribes: []config.Subscribe{{Topic: "audit"}}},
		}}, "topics.audit.policies.broadcast.ack_mode all requires a broadcast-only topic, but balanced consumer group(s) c subscribe, which makes it mixed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := config.Resolve(mustParse(t, tc.doc), tc.w)
			if err == nil {
				t.Fatalf("Resolve accepted the wiring: %+v", plan)
			}
			if got, want := err.Error(), "invalid options: "+tc.want; got != want {
				t.Fatalf("error\n got %q\nwant %q", got, want)
			}
			if !errors.Is(err, validate.ErrInvalid) {
				t.Fatalf("error %v does not wrap validate.ErrInvalid", err)
			}
		})
	}
}

// A pipeline that publishes into a topic it subscribes to is a cycle, named
// in the error.
func TestResolveSamePipelineCycle(t *testing.T) {
	_, err := config.Resolve(mustParse(t, threeTopics), config.Wiring{Pipelines: []config.Pipeline{
		{Name: "a", Subscribes: []config.Subscribe{{Topic: "t1"}}, Publishes: []config.Publish{{Topic: "t1"}}},
	}})
	var ce *config.CycleError
	if !errors.As(err, &ce) || !errors.Is(err, config.ErrWiringCycle) {
		t.Fatalf("got %v, want a *CycleError", err)
	}
	if got, want := err.Error(), "config: wiring cycle: pipeline a → topic t1 → pipeline a"; got != want {
		t.Fatalf("error\n got %q\nwant %q", got, want)
	}
}

// A loop through several pipelines and topics is a cycle, named in the error
// from the pipeline where it was found back to it.
func TestResolveMultiPipelineCycle(t *testing.T) {
	_, err := config.Resolve(mustParse(t, threeTopics), config.Wiring{Pipelines: []config.Pipeline{
		{Name: "a", Publishes: []config.Publish{{Topic: "t1"}}, Subscribes: []config.Subscribe{{Topic: "t3", Mode: config.Broadcast}}},
		{Name: "b", Subscribes: []config.Subscribe{{Topic: "t1"}}, Publishes: []config.Publish{{Topic: "t2"}}},
		{Name: "c", Subscribes: []config.Subscribe{{Topic: "t2"}}, Publishes: []config.Publish{{Topic: "t3"}}},
	}})
	if !errors.Is(err, config.ErrWiringCycle) {
		t.Fatalf("got %v, want ErrWiringCycle", err)
	}
	want := "config: wiring cycle: pipeline a → topic t1 → pipeline b → topic t2 → pipeline c → topic t3 → pipeline a"
	if err.Error() != want {
		t.Fatalf("error\n got %q\nwant %q", err.Error(), want)
	}
	var ce *config.CycleError
	if !errors.As(err, &ce) || len(ce.Path) != 7 {
		t.Fatalf("got %#v, want a 7-step path", ce)
	}
}

// A cycle that does not pass through the first pipeline is still found, and
// reported from where it closes.
func TestResolveCycleOffTheStart(t *testing.T) {
	_, err := config.Resolve(mustParse(t, threeTopics), config.Wiring{Pipelines: []config.Pipeline{
		{Name: "in", Publishes: []config.Publish{{Topic: "t1"}}},
		{Name: "x", Subscribes: []config.Subscribe{{Topic: "t1"}, {Topic: "t3"}}, Publishes: []config.Publish{{Topic: "t2"}}},
		{Name: "y", Subscribes: []config.Subscribe{{Topic: "t2"}}, Publishes: []config.Publish{{Topic: "t3"}}},
	}})
	want := "config: wiring cycle: pipeline x → topic t2 → pipeline y → topic t3 → pipeline x"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// Fan-out and fan-in without a loop (a diamond) is not a cycle.
func TestResolveDiamondIsNoCycle(t *testing.T) {
	_, err := config.Resolve(mustParse(t, threeTopics), config.Wiring{Pipelines: []config.Pipeline{
		{Name: "a", Publishes: []config.Publish{{Topic: "t1"}}},
		{Name: "b", Subscribes: []config.Subscribe{{Topic: "t1", Mode: config.Broadcast}}, Publishes: []config.Publish{{Topic: "t2"}}},
		{Name: "c", Subscribes: []config.Subscribe{{Topic: "t1", Mode: config.Broadcast}}, Publishes: []config.Publish{{Topic: "t2"}}},
		{Name: "d", Subscribes: []config.Subscribe{{Topic: "t2"}}},
	}})
	if err != nil {
		t.Fatalf("diamond rejected: %v", err)
	}
}

// A pipeline in a group sees the group's topics first, then the global ones;
// group topics get "<group>/<name>" broker names.
func TestResolveGroupScope(t *testing.T) {
	cfg := mustParse(t, `
topics:
  shared: {}
  local:
    policies:
      balanced: {queue_capacity: 1}
groups:
  g:
    topics:
      local:
        policies:
          balanced: {queue_capacity: 2}
`)
	plan, err := config.Resolve(cfg, config.Wiring{Pipelines: []config.Pipeline{
		{Name: "in-g", Group: "g", Publishes: []config.Publish{{Topic: "local"}, {Topic: "shared"}}},
		{Name: "outside", Subscribes: []config.Subscribe{{Topic: "local"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]topic.Name{}
	for _, b := range plan.Pipelines[0].Bindings {
		got[b.Alias] = b.Topic
	}
	if got["local"] != "g/local" || got["shared"] != "shared" {
		t.Fatalf("group pipeline bindings %v, want local→g/local, shared→shared", got)
	}
	if b := plan.Pipelines[1].Bindings[0]; b.Topic != "local" {
		t.Fatalf("pipeline outside the group bound %s, want the global local", b.Topic)
	}
	names := []topic.Name{}
	for _, tp := range plan.Topics {
		names = append(names, tp.Name)
	}
	if !slices.Equal(names, []topic.Name{"g/local", "local", "shared"}) {
		t.Fatalf("planned topics %v", names)
	}
}

// restricted is a backend with fewer capabilities than the in-memory one
// (it creates in-memory topics when asked).
type restricted struct {
	name string
	caps topic.Capabilities
}

func (r restricted) Name() string                     { return r.name }
func (r restricted) Capabilities() topic.Capabilities { return r.caps }
func (r restricted) NewTopic(ctx context.Context, name topic.Name, o topic.Options) (topic.State[int], error) {
	return topic.InMemory[int]{}.NewTopic(ctx, name, o)
}

// Build checks every topic against its backend's capabilities before it
// creates anything, and names the declaration and the missing capability.
func TestBuildCapabilityErrors(t *testing.T) {
	cfg := mustParse(t, `
topics:
  fine: {}
  mixed:
    backend: balanced_only_backend
    impl_selection: force_mixed
  lag:
    backend: no_disconnect
    policies:
      broadcast: {on_lag: disconnect}
  ghost:
    backend: rabbitmq
`)
	plan, err := config.Resolve(cfg, config.Wiring{Pipelines: []config.Pipeline{
		{Name: "p", Subscribes: []config.Subscribe{{Topic: "lag", Mode: config.Broadcast}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	all := topic.InMemory[int]{}.Capabilities()
	onlyBalanced := all
	onlyBalanced.Modes = []topic.Mode{topic.BalancedOnly}
	noDisconnect := all
	noDisconnect.OnLag = []topic.OnLag{topic.DropOldest}
	broker := topic.NewBroker[int]()
	defer broker.Close()
	_, err = config.Build(broker, plan,
		restricted{"balanced_only_backend", onlyBalanced}, restricted{"no_disconnect", noDisconnect})
	if err == nil {
		t.Fatal("Build accepted unsupported topics")
	}
	for _, sentinel := range []error{topic.ErrUnsupportedBackend, topic.ErrUnsupportedMode, topic.ErrUnsupportedPolicy} {
		if !errors.Is(err, sentinel) {
			t.Errorf("error %v does not wrap %v", err, sentinel)
		}
	}
	want := `topics.ghost.backend: topic: unsupported backend "rabbitmq"` + "; " +
		`topics.lag: topic: backend "no_disconnect" does not support broadcast.on_lag "disconnect"` + "; " +
		`topics.mixed: topic: backend "balanced_only_backend" does not support mode "mixed"`
	if err.Error() != want {
		t.Fatalf("error\n got %q\nwant %q", err.Error(), want)
	}
	var te *config.TopicError
	if !errors.As(err, &te) {
		t.Fatalf("error %v is not a *TopicError", err)
	}
	if names := broker.Names(); len(names) != 0 {
		t.Fatalf("topics were created despite the errors: %v", names)
	}
}

// Creation is atomic: when one topic of the document cannot be created
// (its name is taken), none is.
func TestBuildAtomic(t *testing.T) {
	broker := topic.NewBroker[int]()
	defer broker.Close()
	if _, err := broker.CreateInMemoryTopic("t2", topic.Options{}); err != nil {
		t.Fatal(err)
	}
	plan, err := config.Resolve(mustParse(t, threeTopics), config.Wiring{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Build(broker, plan); !errors.Is(err, topic.ErrTopicExists) {
		t.Fatalf("got %v, want ErrTopicExists", err)
	}
	if names := broker.Names(); !slices.Equal(names, []topic.Name{"t2"}) {
		t.Fatalf("broker holds %v after a failed batch, want only the existing t2", names)
	}
}

// End to end: a document is parsed, resolved and built into broker topics
// with the inferred modes, and each pipeline's topic set carries the
// resolved queue_on_full and ack_propagation and reaches the right topic.
func TestLoadEndToEnd(t *testing.T) {
	doc := yamlDoc(`
topics:
  ingress:
    policies:
      balanced: {queue_capacity: 4, on_full: block}
      ack_propagation: {mode: auto, max_in_flight: 8, timeout: 2s}
  audit:
    policies:
      broadcast: {queue_capacity: 16, on_lag: disconnect, ack_mode: all}
      ack_propagation: {mode: auto}
groups:
  edge:
    topics:
      raw:
        impl_selection: force_mixed
`)
	w := config.Wiring{Pipelines: []config.Pipeline{
		{Name: "gateway", Group: "edge", Publishes: []config.Publish{{Topic: "raw"}}},
		{Name: "parse", Group: "edge", Subscribes: []config.Subscribe{{Topic: "raw"}},
			Publishes: []config.Publish{{Topic: "ingress", QueueOnFull: "drop_newest"}, {Topic: "audit"}}},
		{Name: "store", Subscribes: []config.Subscribe{{Topic: "ingress", ConsumerGroup: "writers"}}},
		{Name: "archive", Subscribes: []config.Subscribe{{Topic: "audit", Mode: config.Broadcast}}},
		{Name: "alert", Subscribes: []config.Subscribe{{Topic: "audit", Mode: config.Broadcast}}},
	}}
	broker := topic.NewBroker[int]()
	defer broker.Close()
	wired, err := config.Load(doc, w, broker)
	if err != nil {
		t.Fatal(err)
	}
	if got := broker.Names(); !slices.Equal(got, []topic.Name{"audit", "edge/raw", "ingress"}) {
		t.Fatalf("broker topics %v", got)
	}
	modes := map[topic.Name]topic.Mode{"audit": topic.BroadcastOnly, "edge/raw": topic.Mixed, "ingress": topic.BalancedOnly}
	for name, mode := range modes {
		h, ok := broker.Topic(name)
		if !ok || h.Options().Mode != mode {
			t.Fatalf("topic %s: %v, mode %v; want %v", name, ok, h.Options().Mode, mode)
		}
	}
	if o, _ := broker.Topic("ingress"); o.Options().Balanced.Capacity != 4 {
		t.Fatalf("ingress capacity %d, want 4", o.Options().Balanced.Capacity)
	}

	set := wired.TopicSet("parse")
	if got := set.Aliases(); !slices.Equal(got, []string{"audit", "ingress", "raw"}) {
		t.Fatalf("parse aliases %v", got)
	}
	ingress, _ := set.Get("ingress")
	wantProp := topic.AckPropagation{Mode: topic.PropagationAuto, MaxInFlight: 8, Timeout: 2 * time.Second}
	if ingress.OnFull != topic.DropNewest || ingress.AckPropagation != wantProp || ingress.Handle.Name() != "ingress" {
		t.Fatalf("parse→ingress binding %+v, want drop_newest override and %+v", ingress, wantProp)
	}
	raw, _ := set.Get("raw")
	if raw.Handle.Name() != "edge/raw" || raw.OnFull != topic.Block {
		t.Fatalf("parse→raw binding %+v", raw)
	}
	if b, ok := wired.Publisher("gateway", "raw"); !ok || b.Handle != raw.Handle {
		t.Fatalf("gateway publishes into %+v, want edge/raw", b)
	}

	subs := wired.Subscriptions("store")
	if len(subs) != 1 || subs[0].Mode.Group() != "writers" || subs[0].Mode.IsBroadcast() {
		t.Fatalf("store subscriptions %+v, want balanced group writers", subs)
	}
	// The wiring works: what parse publishes into ingress reaches store's
	// group.
	sub, err := subs[0].Binding.Handle.Subscribe(t.Context(), subs[0].Mode, topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if out, err := ingress.Publish(ctx, 42); err != nil || out != topic.Published {
		t.Fatalf("publish: %v %v", out, err)
	}
	it, err := sub.Receive(ctx)
	if err != nil || it.Value != 42 {
		t.Fatalf("received %+v, %v; want 42", it, err)
	}
	archive := wired.Subscriptions("archive")
	if len(archive) != 1 || !archive[0].Mode.IsBroadcast() || archive[0].Binding.Handle.Name() != "audit" {
		t.Fatalf("archive subscriptions %+v", archive)
	}
}

// The plan records who uses each topic: its balanced consumer groups
// sorted, its broadcast subscribers and its publishers in wiring order.
func TestResolveRecordsWhoUsesEachTopic(t *testing.T) {
	plan, err := config.Resolve(mustParse(t, threeTopics), config.Wiring{Pipelines: []config.Pipeline{
		{Name: "zeta", Subscribes: []config.Subscribe{{Topic: "t1"}}, Publishes: []config.Publish{{Topic: "t2"}}},
		{Name: "alpha", Subscribes: []config.Subscribe{{Topic: "t1"}, {Topic: "t2", Mode: config.Broadcast}}},
		{Name: "mid", Subscribes: []config.Subscribe{{Topic: "t2", Mode: config.Broadcast}}, Publishes: []config.Publish{{Topic: "t3"}}},
		{Name: "first", Publishes: []config.Publish{{Topic: "t3"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[topic.Name]config.TopicPlan{}
	for _, tp := range plan.Topics {
		byName[tp.Name] = tp
	}
	if got := byName["t1"].BalancedGroups; !slices.Equal(got, []topic.GroupName{"alpha", "zeta"}) {
		t.Errorf("t1 balanced groups %v, want [alpha zeta] (sorted)", got)
	}
	if got := byName["t2"].Broadcasters; !slices.Equal(got, []string{"alpha", "mid"}) {
		t.Errorf("t2 broadcasters %v, want [alpha mid]", got)
	}
	if got := byName["t2"].Publishers; !slices.Equal(got, []string{"zeta"}) {
		t.Errorf("t2 publishers %v, want [zeta]", got)
	}
	if got := byName["t3"].Publishers; !slices.Equal(got, []string{"mid", "first"}) {
		t.Errorf("t3 publishers %v, want [mid first] (wiring order)", got)
	}
}

// The error for an ack_mode all topic with balanced subscribers names at
// most MaxListedErrors of their groups, then counts the rest.
func TestResolveNamesAtMostMaxListedErrorsGroups(t *testing.T) {
	var w config.Wiring
	for i := range config.MaxListedErrors + 2 {
		w.Pipelines = append(w.Pipelines, config.Pipeline{Name: fmt.Sprintf("p%02d", i), Subscribes: []config.Subscribe{{Topic: "audit"}}})
	}
	_, err := config.Resolve(mustParse(t, `
topics:
  audit:
    policies:
      broadcast: {on_lag: disconnect, ack_mode: all}
      ack_propagation: {mode: auto}
`), w)
	if err == nil || !strings.Contains(err.Error(), "consumer group(s) p00, p01,") || !strings.Contains(err.Error(), ", p19, and 2 more subscribe") {
		t.Fatalf("Resolve = %v, want the groups p00 to p19 named, then \"and 2 more\"", err)
	}
}
