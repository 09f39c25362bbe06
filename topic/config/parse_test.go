package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/validate"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// rcrowley/go-metrics (sarama's metric registry, in the tests on a
		// Kafka backend) starts one process-wide meter ticker on first use
		// and never stops it.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}

// yamlDoc turns a tab-free indented literal into YAML (tests write YAML with
// two-space indents inside Go raw strings).
func yamlDoc(s string) []byte { return []byte(strings.TrimPrefix(s, "\n")) }

// A declaration that sets nothing gets every documented default.
func TestParseDefaults(t *testing.T) {
	cfg, err := config.Parse(yamlDoc(`
topics:
  ingress: {}
  empty:
groups:
  g1:
    topics:
      local:
        policies:
          balanced:
`))
	if err != nil {
		t.Fatal(err)
	}
	want := config.TopicSpec{
		Backend:       "in_memory",
		ImplSelection: "auto",
		Policies: config.PolicySpec{
			Balanced:       config.BalancedSpec{QueueCapacity: 1024, OnFull: "block"},
			Broadcast:      config.BroadcastSpec{QueueCapacity: 4096, OnLag: "drop_oldest", AckMode: "first"},
			AckPropagation: config.AckPropagationSpec{Mode: "disabled", MaxInFlight: 1024, Timeout: 30 * time.Second},
		},
	}
	for name, got := range map[string]config.TopicSpec{
		"topics.ingress":         cfg.Topics["ingress"],
		"topics.empty":           cfg.Topics["empty"],
		"groups.g1.topics.local": cfg.Groups["g1"].Topics["local"],
		"DefaultTopicSpec()":     config.DefaultTopicSpec(),
	} {
		if got != want {
			t.Errorf("%s = %+v, want the defaults %+v", name, got, want)
		}
	}
}

// Every key of the seed's YAML mapping is read, durations included.
func TestParseEveryKey(t *testing.T) {
	cfg, err := config.Parse(yamlDoc(`
topics:
  ingress:
    backend: in_memory
    impl_selection: force_mixed
    policies:
      balanced:
        queue_capacity: 8
        on_full: drop_newest
      broadcast:
        queue_capacity: 16
        on_lag: disconnect
        ack_mode: first
      ack_propagation:
        mode: auto
        max_in_flight: 3
        timeout: 1m30s
`))
	if err != nil {
		t.Fatal(err)
	}
	want := config.TopicSpec{
		Backend:       "in_memory",
		ImplSelection: "force_mixed",
		Policies: config.PolicySpec{
			Balanced:       config.BalancedSpec{QueueCapacity: 8, OnFull: "drop_newest"},
			Broadcast:      config.BroadcastSpec{QueueCapacity: 16, OnLag: "disconnect", AckMode: "first"},
			AckPropagation: config.AckPropagationSpec{Mode: "auto", MaxInFlight: 3, Timeout: 90 * time.Second},
		},
	}
	if got := cfg.Topics["ingress"]; got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// Every rule of the YAML mapping rejects a bad document with an error that
// names the YAML path and the rule.
func TestParseRejects(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"balanced capacity", `
topics:
  ingress:
    policies:
      balanced:
        queue_capacity: 0
`, "topics.ingress.policies.balanced.queue_capacity must be ≥ 1"},
		{"broadcast capacity", `
topics:
  audit:
    policies:
      broadcast:
        queue_capacity: -4
`, "topics.audit.policies.broadcast.queue_capacity must be ≥ 1"},
		{"on_full", `
topics:
  ingress:
    policies:
      balanced:
        on_full: drop_oldest
`, "topics.ingress.policies.balanced.on_full must be one of [block drop_newest]"},
		{"on_lag", `
topics:
  audit:
    policies:
      broadcast:
        on_lag: block
`, "topics.audit.policies.broadcast.on_lag must be one of [drop_oldest disconnect]"},
		{"ack_mode", `
topics:
  audit:
    policies:
      broadcast:
        ack_mode: some
`, "topics.audit.policies.broadcast.ack_mode must be one of [first all]"},
		{"propagation mode", `
topics:
  audit:
    policies:
      ack_propagation:
        mode: on
`, "topics.audit.policies.ack_propagation.mode must be one of [disabled auto]"},
		{"max_in_flight", `
topics:
  audit:
    policies:
      ack_propagation:
        max_in_flight: 0
`, "topics.audit.policies.ack_propagation.max_in_flight must be ≥ 1"},
		{"timeout not a duration", `
topics:
  audit:
    policies:
      ack_propagation:
        timeout: 30
`, `topics.audit.policies.ack_propagation.timeout must be a duration such as 30s or 1m30s, not "30"`},
		{"timeout too short", `
topics:
  audit:
    policies:
      ack_propagation:
        timeout: 0s
`, "topics.audit.policies.ack_propagation.timeout must be ≥ 1ms"},
		{"timeout too long", `
topics:
  audit:
    policies:
      ack_propagation:
        timeout: 24h1s
`, "topics.audit.policies.ack_propagation.timeout must be ≤ 24h"},
		{"impl_selection", `
topics:
  ingress:
    impl_selection: mixed
`, "topics.ingress.impl_selection must be one of [auto force_mixed]"},
		{"empty backend", `
topics:
  ingress:
    backend: ""
`, "topics.ingress.backend is required"},
		{"unknown top-level key", `
topic:
  ingress: {}
`, "topic is not a known key (line 1); document accepts: defaults, connections, topics, groups"},
		{"unknown topic key", `
topics:
  ingress:
    capacity: 10
`, "topics.ingress.capacity is not a known key (line 3); topics.ingress accepts: backend, connection, impl_selection, policies"},
		{"unknown policy", `
topics:
  ingress:
    policies:
      balance:
        queue_capacity: 1
`, "topics.ingress.policies.balance is not a known key (line 4); topics.ingress.policies accepts: balanced, broadcast, ack_propagation"},
		{"unknown balanced key (typo)", `
topics:
  ingress:
    policies:
      balanced:
        queue_capcity: 1
`, "topics.ingress.policies.balanced.queue_capcity is not a known key (line 5); topics.ingress.policies.balanced accepts: queue_capacity, on_full"},
		{"unknown group key", `
groups:
  g1:
    pipelines: {}
`, "groups.g1.pipelines is not a known key (line 3); groups.g1 accepts: topics"},
		{"unknown key in a group topic", `
groups:
  g1:
    topics:
      local:
        policies:
          ack_propagation:
            retries: 3
`, "groups.g1.topics.local.policies.ack_propagation.retries is not a known key (line 7); groups.g1.topics.local.policies.ack_propagation accepts: mode, max_in_flight, timeout"},
		{"integer expected", `
topics:
  ingress:
    policies:
      balanced:
        queue_capacity: lots
`, `topics.ingress.policies.balanced.queue_capacity must be an integer, not "lots" (line 5)`},
		{"mapping expected", `
topics:
  ingress: [1, 2]
`, "topics.ingress must be a mapping (line 2)"},
		{"slash in a topic name", `
topics:
  a/b: {}
`, `topics.a/b name "a/b" must not contain "/"`},
		{"empty topic name", `
topics:
  "": {}
`, "topics. must have a non-empty name"},
		{"ack_mode all without auto propagation", `
topics:
  audit:
    policies:
      broadcast:
        on_lag: disconnect
        ack_mode: all
`, "topics.audit.policies.broadcast.ack_mode all requires policies.ack_propagation.mode auto, not disabled"},
		{"ack_mode all without on_lag disconnect", `
topics:
  audit:
    policies:
      broadcast:
        ack_mode: all
      ack_propagation:
        mode: auto
`, "topics.audit.policies.broadcast.ack_mode all requires policies.broadcast.on_lag disconnect, not drop_oldest"},
		{"ack_mode all on a forced mixed topic", `
topics:
  audit:
    impl_selection: force_mixed
    policies:
      broadcast:
        on_lag: disconnect
        ack_mode: all
      ack_propagation:
        mode: auto
`, "topics.audit.policies.broadcast.ack_mode all requires a broadcast-only topic, but impl_selection force_mixed makes it mixed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse(yamlDoc(tc.doc))
			if err == nil {
				t.Fatalf("Parse accepted the document: %+v", cfg)
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

// Every broken rule of a document is reported at once, not only the first.
func TestParseReportsAllProblems(t *testing.T) {
	_, err := config.Parse(yamlDoc(`
topics:
  a:
    policies:
      balanced:
        queue_capacity: 0
  b:
    policies:
      ack_propagation:
        max_in_flight: 0
`))
	var es validate.Errors
	if !errors.As(err, &es) {
		t.Fatalf("got %v, want validate.Errors", err)
	}
	if !es.Has("topics.a.policies.balanced.queue_capacity", "gte") || !es.Has("topics.b.policies.ack_propagation.max_in_flight", "gte") || len(es) != 2 {
		t.Fatalf("got %v, want both capacity errors", err)
	}
}

// A document that is not YAML fails with ErrSyntax.
func TestParseSyntax(t *testing.T) {
	_, err := config.Parse([]byte("topics:\n  a: [\n"))
	if !errors.Is(err, config.ErrSyntax) {
		t.Fatalf("got %v, want ErrSyntax", err)
	}
}

// An empty document declares no topics.
func TestParseEmpty(t *testing.T) {
	cfg, err := config.Parse(nil)
	if err != nil || len(cfg.Topics) != 0 || len(cfg.Groups) != 0 {
		t.Fatalf("got %+v, %v; want an empty config", cfg, err)
	}
}

// YAML anchors, aliases and merge keys work, and keys brought in by a merge
// are checked like the others.
func TestParseAnchors(t *testing.T) {
	cfg, err := config.Parse(yamlDoc(`
topics:
  a: &strict
    policies:
      balanced: {queue_capacity: 8, on_full: drop_newest}
  b: *strict
  c:
    <<: *strict
    impl_selection: force_mixed
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		if got := cfg.Topics[name].Policies.Balanced; got != (config.BalancedSpec{QueueCapacity: 8, OnFull: "drop_newest"}) {
			t.Errorf("topics.%s balanced = %+v", name, got)
		}
	}
	if cfg.Topics["c"].ImplSelection != "force_mixed" {
		t.Errorf("topics.c impl_selection = %q", cfg.Topics["c"].ImplSelection)
	}
	_, err = config.Parse(yamlDoc(`
base: &base
  capacity: 3
topics:
  a:
    <<: *base
`))
	if err == nil || !strings.Contains(err.Error(), "base is not a known key") || !strings.Contains(err.Error(), "topics.a.capacity is not a known key (line 2)") {
		t.Fatalf("got %v, want the merged unknown key named under topics.a", err)
	}
}
