package config_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

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
	_, blocks := topicConfigDoc(t)
	for i, b := range blocks {
		if _, err := config.Parse(b); err != nil {
			t.Errorf("YAML document %d of docs/topic-config.md: %v\n%s", i+1, err, b)
		}
	}
}

// topicConfigDoc returns docs/topic-config.md and its YAML documents.
func topicConfigDoc(t *testing.T) (md []byte, blocks [][]byte) {
	t.Helper()
	md, err := os.ReadFile("../../docs/topic-config.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(md, -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) < 2 {
		t.Fatalf("docs/topic-config.md holds %d YAML documents, want the declarations and the connections", len(blocks))
	}
	return md, blocks
}

// topicKeys adds to keys the path of every key under the topic
// declaration n, policies left out of the path as the docs write it
// (balanced.queue_capacity).
func topicKeys(keys map[string]bool, prefix string, n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := prefix + n.Content[i].Value
		keys[k] = true
		if k == "policies" {
			topicKeys(keys, "", n.Content[i+1])
			continue
		}
		topicKeys(keys, k+".", n.Content[i+1])
	}
}

// Guarantee: every key the table of section 1 of docs/topic-config.md
// explains is written in one of its YAML documents, at the place the
// table gives it, and so is a key Parse accepts (those documents parse,
// and Parse refuses unknown keys), so that a user who writes a key from
// the table does not get "is not a known key".
func TestTopicConfigDocKeysTableNamesAcceptedKeys(t *testing.T) {
	md, blocks := topicConfigDoc(t)
	written := map[string]bool{}
	for _, b := range blocks {
		var doc yaml.Node
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		var walk func(path string, n *yaml.Node)
		walk = func(path string, n *yaml.Node) {
			for i := 0; i+1 < len(n.Content); i += 2 {
				switch key, v := n.Content[i].Value, n.Content[i+1]; {
				case path == "topics":
					topicKeys(written, "", v)
				case v.Kind == yaml.MappingNode:
					walk(strings.TrimPrefix(path+"."+key, "."), v)
				}
			}
		}
		walk("", doc.Content[0])
	}
	section, _, _ := strings.Cut(string(md), "### 1.1")
	rows := regexp.MustCompile("(?m)^\\| `([a-z_.]+)` \\|").FindAllStringSubmatch(section, -1)
	if len(rows) < 10 {
		t.Fatalf("the keys table of docs/topic-config.md has %d rows; the test would check little", len(rows))
	}
	for _, r := range rows {
		if !written[r[1]] {
			t.Errorf("docs/topic-config.md explains the key %s, which none of its YAML documents writes in a topic declaration", r[1])
		}
	}
}
