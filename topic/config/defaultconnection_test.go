package config_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/boulevard-go/boulevard/topic/config"
)

// Guarantee: defaults.connection is the connection of the kafka and
// pulsar topics that name none: an in-memory topic beside them parses
// with no connection, without having to clear it, while one that names a
// connection itself is still refused.
func TestDefaultConnectionLeavesInMemoryTopicsWithoutOne(t *testing.T) {
	cfg := mustParse(t, `
defaults:
  backend: kafka
  connection: main
connections:
  main: {kind: kafka, brokers: ["127.0.0.1:9092"]}
topics:
  orders: {}
  scratch: {backend: in_memory}
groups:
  edge:
    topics:
      raw: {backend: in_memory}
`)
	if s := cfg.Topics["orders"]; s.Backend != "kafka" || s.Connection != "main" {
		t.Errorf("orders: backend %q connection %q, want kafka main", s.Backend, s.Connection)
	}
	if s := cfg.Topics["scratch"]; s.Backend != "in_memory" || s.Connection != "" {
		t.Errorf("scratch: backend %q connection %q, want in_memory and none", s.Backend, s.Connection)
	}
	if s := cfg.Groups["edge"].Topics["raw"]; s.Backend != "in_memory" || s.Connection != "" {
		t.Errorf("edge/raw: backend %q connection %q, want in_memory and none", s.Backend, s.Connection)
	}
	_, err := config.Parse([]byte(`
defaults: {connection: main}
connections:
  main: {kind: kafka, brokers: ["127.0.0.1:9092"]}
topics:
  t: {backend: in_memory, connection: main}
`))
	if err == nil || err.Error() != "invalid options: topics.t.connection must not be set for backend in_memory" {
		t.Fatalf("Parse of an in-memory topic naming a connection = %v, want it refused", err)
	}
}

// Guarantee: every YAML document docs/topic-config.md shows parses, so
// that a user who starts from one gets a working declaration.
func TestTopicConfigDocExamplesParse(t *testing.T) {
	md, err := os.ReadFile("../../docs/topic-config.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(md, -1)
	if len(blocks) < 2 {
		t.Fatalf("docs/topic-config.md holds %d YAML documents, want the declarations and the connections", len(blocks))
	}
	for i, b := range blocks {
		if _, err := config.Parse(b[1]); err != nil {
			t.Errorf("YAML document %d of docs/topic-config.md: %v\n%s", i+1, err, b[1])
		}
	}
}
