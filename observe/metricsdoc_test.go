package observe_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/observe"
)

var (
	// docMetricRow is a row of a metric table of docs/observability.md:
	// | `name` | type | labels | value |
	docMetricRow = regexp.MustCompile("^\\| `(boulevard_[a-z_]+)` \\| [a-z]+ \\| ([^|]*) \\|")
	descName     = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels   = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

// Guarantee: the metric tables of docs/observability.md list exactly the
// metrics the Observer describes, each with the labels it has, so that
// the dashboards and alerts a user writes from the docs select series
// that exist.
func TestObservabilityDocListsEveryMetricWithItsLabels(t *testing.T) {
	md, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string][]string{}
	for line := range strings.SplitSeq(string(md), "\n") {
		m := docMetricRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var labels []string
		for l := range strings.SplitSeq(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" && l != "—" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		documented[m[1]] = labels
	}

	described := describedMetrics(t)
	if len(described) < 40 {
		t.Fatalf("the Observer describes only %d metrics; the test would check little", len(described))
	}
	for _, name := range slices.Sorted(maps.Keys(described)) {
		doc, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("%s (labels %v) is not in the metric tables of docs/observability.md", name, described[name])
		case !slices.Equal(doc, described[name]):
			t.Errorf("%s: docs/observability.md gives labels %v, the Observer %v", name, doc, described[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := described[name]; !ok {
			t.Errorf("docs/observability.md lists %s, which the Observer does not export", name)
		}
	}
}

// describedMetrics returns the metrics an Observer describes, by name,
// each with its sorted labels.
func describedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	obs := observe.New(observe.Options{})
	ch := make(chan *prometheus.Desc)
	go func() {
		obs.Describe(ch)
		close(ch)
	}()
	described := map[string][]string{}
	for d := range ch {
		s := d.String()
		name := descName.FindStringSubmatch(s)
		if name == nil {
			t.Fatalf("cannot read the name of %s", s)
		}
		var labels []string
		if l := descLabels.FindStringSubmatch(s); l != nil {
			for v := range strings.SplitSeq(l[1], ",") {
				if v = strings.TrimSpace(v); v != "" {
					labels = append(labels, v)
				}
			}
		}
		slices.Sort(labels)
		described[name[1]] = labels
	}
	return described
}

// docMetricName is a metric name in a doc: the name, and what follows it
// (a "*" or a "_" makes it a prefix, not a name).
var docMetricName = regexp.MustCompile(`\b(boulevard_[a-z_]*[a-z])([*_]?)`)

// Guarantee: every metric name the docs (README.md, docs/*.md and the
// examples' READMEs) give is one the Observer exports (a histogram's
// _bucket, _sum and _count included), so that a query or alert a user
// copies from any page selects series that exist, not only from the
// metric tables of docs/observability.md. The performance log is left
// out: it records past commits.
func TestDocsNameOnlyExportedMetrics(t *testing.T) {
	described := describedMetrics(t)
	docs, _ := filepath.Glob("../docs/*.md")
	examples, _ := filepath.Glob("../examples/*/README.md")
	checked := 0
	for _, file := range slices.Concat([]string{"../README.md"}, docs, examples) {
		if filepath.Base(file) == "performance-log.md" {
			continue
		}
		md, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docMetricName.FindAllStringSubmatch(string(md), -1) {
			if m[2] != "" {
				continue // a prefix: boulevard_pulsar_*
			}
			checked++
			name := m[1]
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && described[base] != nil {
					name = base
				}
			}
			if _, ok := described[name]; !ok {
				t.Errorf("%s names %s, which the Observer does not export", strings.TrimPrefix(file, "../"), m[1])
			}
		}
	}
	if checked < 100 {
		t.Fatalf("the docs name %d metrics; the test would check little", checked)
	}
}
