package imports_test

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

const module = "github.com/boulevard-go/boulevard"

// rule constrains the packages of the module that match From (a path
// relative to the module, or a prefix ending in "/..." that covers the
// package itself and those below it). Only the module's own packages count;
// the standard library and other modules are never constrained here.
type rule struct {
	from string
	// only, when set, lists every module package From may import directly
	// (patterns as for From); anything else is a violation.
	only []string
	// never lists module packages From must not depend on, directly or
	// through other module packages.
	never []string
	// why is the sentence reported with a violation.
	why string
}

// rules is the import direction of the module. The test fails when a
// non-test import breaks one of them.
var rules = []rule{
	// The outcome contract is the lowest piece: everything acknowledges
	// through it, so it can depend on nothing.
	{from: "acker", only: []string{}, why: "acker imports nothing of the module"},
	// Option validation is a leaf helper that every layer may use.
	{from: "validate", only: []string{}, why: "validate imports nothing of the module"},
	// A message knows its acknowledger and nothing of the stages that carry
	// it: no goroutines, no I/O, no stage plumbing.
	{from: "message", only: []string{"acker"}, why: "message imports only acker"},
	// The stage queues sit under both the stages and the in-memory topic
	// backend, so they import nothing of the module.
	{from: "internal/queue", only: []string{}, why: "the stage queues import nothing of the module"},
	// The goroutine group, the panic logger and the wait condition are
	// leaves the stages use.
	{from: "internal/group", only: []string{}, why: "internal/group imports nothing of the module"},
	{from: "internal/panics", only: []string{}, why: "internal/panics imports nothing of the module"},
	{from: "internal/cond", only: []string{}, why: "internal/cond imports nothing of the module"},
	// The set of a source's live resources, closed once.
	{from: "internal/liveset", only: []string{}, why: "internal/liveset imports nothing of the module"},
	{from: "internal/sourcewire", only: []string{"internal/release"}, why: "internal/sourcewire imports only the release signal it hands the producer"},
	// A source's release of a feed, from the producer stages to the
	// batchers.
	{from: "internal/release", only: []string{}, why: "internal/release imports nothing of the module"},
	{from: "internal/kafkaoffset", only: []string{"acker", "internal/kafkarefusal"}, why: "the shared Kafka offset tracking imports only acker and the refusal table"},
	// When a Kafka reader cannot read from its cluster, one rule for the
	// Kafka sources and the Kafka topic backend.
	{from: "internal/kafkareach", only: []string{}, why: "internal/kafkareach imports nothing of the module"},
	{from: "internal/kafkaends", only: []string{"internal/kafkaconn"}, why: "internal/kafkaends imports only internal/kafkaconn, whose sets its connections are cut through"},
	// One table of Kafka's refusals for good, for every client.
	{from: "internal/kafkarefusal", only: []string{}, why: "internal/kafkarefusal imports nothing of the module"},
	// The bounded lists of the log lines about many partitions, topics or
	// keys, for every source and backend.
	{from: "internal/logattr", only: []string{}, why: "internal/logattr imports nothing of the module"},
	{from: "internal/logburst", only: []string{}, why: "internal/logburst imports nothing of the module"},
	// The lines of a failure that goes on, logged at growing intervals,
	// for the Kafka topic and topology backends.
	{from: "internal/repeatlog", only: []string{"internal/logattr"}, why: "internal/repeatlog imports only internal/logattr, for the partitions its lines list"},
	// The failure lines of the stage runtime, kept to one per interval.
	{from: "internal/stage/failurelog", only: []string{"internal/logburst", "message"}, why: "internal/stage/failurelog imports only internal/logburst, and message for how a failed message is logged"},
	// The single-record producers' configuration of the Kafka topic and
	// topology backends.
	{from: "internal/kafkaalone", only: []string{}, why: "internal/kafkaalone imports nothing of the module"},
	// The bounds of the sarama fields that size sarama's allocations,
	// shared by every option package that takes a sarama.Config.
	{from: "internal/kafkalimits", only: []string{"validate"}, why: "internal/kafkalimits imports only validate"},
	// The printing of values that hold credentials, shared by every
	// package whose options or backend hold them.
	{from: "internal/redact", only: []string{}, why: "internal/redact imports nothing of the module"},
	{from: "internal/redact/redacttest", only: []string{}, why: "internal/redact/redacttest imports nothing of the module"},
	{from: "internal/pulsarnack", only: []string{}, why: "internal/pulsarnack imports nothing of the module"},
	{from: "internal/pulsarsize", only: []string{}, why: "internal/pulsarsize imports nothing of the module"},
	// The telemetry hooks are called by the stage runtime and by the
	// sources, which never import each other: the hook API depends on
	// neither, only on the message types its events name.
	{from: "telemetry", only: []string{"message"}, why: "telemetry imports only message"},
	// The hooks' panic guard sits on the hook API and the panic logger,
	// so that the stage runtime and the sources can share it.
	{from: "internal/safehooks", only: []string{"telemetry", "internal/panics"}, why: "internal/safehooks imports only telemetry and internal/panics"},
	// The public stage packages hold options, handler types and the source
	// contract; their runtime depends on them, never the reverse.
	{from: "producer", only: []string{"message", "validate", "internal/group", "internal/panics", "internal/cond", "internal/sourcewire", "internal/release"}, why: "producer imports only message, validate and the internal leaves"},
	{from: "processor", only: []string{"message", "validate"}, why: "processor imports only message and validate"},
	{from: "batcher", only: []string{"message", "validate"}, why: "batcher imports only message and validate"},
	// The core stages move messages through internal/queue, never through
	// the topic broker, which is a user-facing feature built beside them.
	{from: "producer", never: []string{"topic/..."}, why: "core stages never depend on the topic broker"},
	{from: "processor", never: []string{"topic/..."}, why: "core stages never depend on the topic broker"},
	{from: "batcher", never: []string{"topic/..."}, why: "core stages never depend on the topic broker"},
	{from: "internal/stage/...", never: []string{"topic/...", "pipeline"}, why: "the stage runtime depends on neither the broker nor the pipeline"},
	{from: "pipeline", never: []string{"topic/...", "sources/..."}, why: "the pipeline depends on neither the broker nor any source (the topic source is topic/source)"},
	// The broker is its backends' contract and the in-memory backend: it
	// builds on the queues and the outcome contract only.
	{from: "topic", only: []string{"message", "acker", "validate", "internal/queue", "internal/logburst", "topic/internal/..."}, why: "topic imports only message, acker, validate, internal/queue, internal/logburst (for its failure lines) and its own internal packages"},
	// Sources implement the producer contract; the pipeline runs them, so
	// they never depend on it (their tests may).
	{from: "sources/...", never: []string{"pipeline", "internal/stage/..."}, why: "sources never depend on the pipeline or the stage runtime outside their tests"},
	{from: "topic/source", never: []string{"pipeline", "internal/stage/..."}, why: "sources never depend on the pipeline or the stage runtime outside their tests"},
	// The exporter reads the Stats of the sources, the topics and the
	// topologies (their backends' included); none of them depends on it.
	{from: "sources/...", never: []string{"observe/..."}, why: "observe reads the sources' Stats: sources never depend on it"},
	{from: "topic/...", never: []string{"observe/..."}, why: "observe reads the topics' and topologies' Stats: the broker, its backends and topologies never depend on it"},
}

// match reports whether the module-relative path p matches pattern.
func match(pattern, p string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func matchAny(patterns []string, p string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return match(pat, p) })
}

// graph returns every package of the module with its direct non-test
// imports inside the module, as paths relative to the module.
func graph(t *testing.T) map[string][]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the module's imports: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-e", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	g := make(map[string][]string)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		from, ok := rel(fields[0])
		if !ok {
			continue
		}
		g[from] = nil
		for _, imp := range fields[1:] {
			if to, ok := rel(imp); ok {
				g[from] = append(g[from], to)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return g
}

// rel turns an import path of the module into a path relative to it.
func rel(importPath string) (string, bool) {
	if importPath == module {
		return ".", true
	}
	r, ok := strings.CutPrefix(importPath, module+"/")
	return path.Clean(r), ok
}

// deps returns the module packages p depends on, directly or not, each with
// the chain of imports that leads to it.
func deps(g map[string][]string, p string) map[string][]string {
	chains := map[string][]string{}
	queue := []string{p}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, next := range g[cur] {
			if _, seen := chains[next]; seen || next == p {
				continue
			}
			chains[next] = append(append([]string{}, chains[cur]...), next)
			queue = append(queue, next)
		}
	}
	return chains
}

// violations checks g against every rule and returns one line per broken
// one, and one per rule that matches no package of g when strict is set.
func violations(g map[string][]string, strict bool) []string {
	pkgs := make([]string, 0, len(g))
	for p := range g {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	var out []string
	for _, r := range rules {
		matched := false
		for _, p := range pkgs {
			if !match(r.from, p) {
				continue
			}
			matched = true
			if r.only != nil {
				for _, imp := range g[p] {
					if !matchAny(r.only, imp) {
						out = append(out, fmt.Sprintf("%s imports %s: %s", p, imp, r.why))
					}
				}
			}
			d := deps(g, p)
			for _, dep := range slices.Sorted(maps.Keys(d)) {
				if matchAny(r.never, dep) {
					out = append(out, fmt.Sprintf("%s depends on %s (through %s): %s", p, dep, strings.Join(d[dep], " → "), r.why))
				}
			}
		}
		if strict && !matched {
			out = append(out, fmt.Sprintf("rule for %s matches no package of the module", r.from))
		}
	}
	return out
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Guarantee: no non-test import of the module breaks the import direction
// of the rules table.
func TestImportDirection(t *testing.T) {
	g := graph(t)
	for _, want := range []string{"acker", "message", "internal/queue", "producer", "processor", "batcher", "pipeline", "topic"} {
		if _, ok := g[want]; !ok {
			t.Fatalf("go list did not report package %s; the test would check nothing", want)
		}
	}
	for _, v := range violations(g, true) {
		t.Error(v)
	}
}

// Guarantee: the rules catch what they forbid: a made-up graph that breaks
// each kind of rule (a direct import outside "only", a dependency through
// another package on a "never" one) is reported, with the chain.
func TestRulesCatchViolations(t *testing.T) {
	g := map[string][]string{
		"message":        {"acker", "producer"},
		"producer":       {"message"},
		"processor":      {"message", "internal/queue"},
		"internal/queue": {"topic"},
		"topic":          {"internal/queue"},
		"sources/kafka":  {"producer", "pipeline"},
		"pipeline":       {"producer"},
	}
	got := strings.Join(violations(g, false), "\n")
	for _, want := range []string{
		"message imports producer",
		"internal/queue imports topic",
		"processor depends on topic (through internal/queue → topic)",
		"sources/kafka depends on pipeline",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("violation %q not reported; reported:\n%s", want, got)
		}
	}
	if strings.Contains(got, "producer imports message") || strings.Contains(got, "topic imports internal/queue") {
		t.Errorf("allowed imports reported:\n%s", got)
	}
}
