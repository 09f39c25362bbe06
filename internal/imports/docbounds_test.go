package imports_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
	"github.com/boulevard-go/boulevard/topic/source"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/validate"
)

// boundConstants are the constants the bounds tables of
// docs/operations.md name, by the name they are given there.
var boundConstants = map[string]int64{
	"producer.MaxConcurrency":         producer.MaxConcurrency,
	"producer.MaxFlowPermits":         producer.MaxFlowPermits,
	"producer.MaxRateLimitAllowed":    producer.MaxRateLimitAllowed,
	"producer.MaxRestartCount":        producer.MaxRestartCount,
	"producer.MaxFailingTimeLimit":    int64(producer.MaxFailingTimeLimit),
	"producer.MaxRateLimitInterval":   int64(producer.MaxRateLimitInterval),
	"producer.MaxRestartWindow":       int64(producer.MaxRestartWindow),
	"producer.MaxBackoffLimit":        int64(producer.MaxBackoffLimit),
	"processor.ConcurrencyLimit":      processor.ConcurrencyLimit,
	"processor.MaxDemandLimit":        processor.MaxDemandLimit,
	"processor.ChunkSlotsLimit":       processor.ChunkSlotsLimit,
	"processor.QueueCapacityLimit":    processor.QueueCapacityLimit,
	"batcher.QueueCapacityLimit":      batcher.QueueCapacityLimit,
	"batcher.BatchQueueCapacityLimit": batcher.BatchQueueCapacityLimit,
	"batcher.BatchSizeLimit":          batcher.BatchSizeLimit,
	"batcher.BatchTimeoutLimit":       int64(batcher.BatchTimeoutLimit),
	"batcher.MaxDemandLimit":          batcher.MaxDemandLimit,
	"batcher.MaxWeightLimit":          batcher.MaxWeightLimit,
	"batcher.ConcurrencyLimit":        batcher.ConcurrencyLimit,
	"pipeline.BatchersLimit":          pipeline.BatchersLimit,
	"pipeline.MaxFailureLogInterval":  int64(pipeline.MaxFailureLogInterval),
	"pipeline.MaxStallThreshold":      int64(pipeline.MaxStallThreshold),
	"pipeline.MaxStallCheckInterval":  int64(pipeline.MaxStallCheckInterval),
	"validate.NameMaxLen":             validate.NameMaxLen,
	"source.MaxBatchLimit":            source.MaxBatchLimit,
	"topology.MaxBatchLimit":          topology.MaxBatchLimit,
	"topology.MaxRetriesLimit":        topology.MaxRetriesLimit,
	"topology.MaxMemoryHoldCapacity":  topology.MaxMemoryHoldCapacity,
	"topology.MaxMemoryCapacity":      topology.MaxMemoryCapacity,
	"topic.MaxCapacity":               topic.MaxCapacity,
	"topic.MaxInFlightLimit":          topic.MaxInFlightLimit,
	"topic.MaxFailureLogInterval":     int64(topic.MaxFailureLogInterval),
	"pulsartopic.MaxPartitions":       pulsartopic.MaxPartitions,
	"pulsartopic.MaxPendingSlots":     pulsartopic.MaxPendingSlots,
	"observe.MaxServerTimeout":        int64(observe.MaxServerTimeout),
	"observe.MaxShutdownTimeout":      int64(observe.MaxShutdownTimeout),
	"observe.MaxServerHeaderBytes":    observe.MaxServerHeaderBytes,
}

var (
	// boundRow is a row of a bounds table: | `option` | bound | constants |
	boundRow = regexp.MustCompile("^\\| (`[^|]+) \\| ([^|]+) \\| ([^|]*) \\|$")
	// upperBound is the number after "…" or "≤" in a bound; a duration
	// is written as Go writes one ("24h").
	upperBound = regexp.MustCompile(`(?:…|≤) ([0-9]+)(h|m|s)?`)
)

// Guarantee: every upper bound the "Bounds on options" tables of
// docs/operations.md give is the value of the constant the row names (the
// constant the code validates with), so that a user sizing options from
// the page gets the limits New enforces.
func TestOperationsBoundsAreTheConstantsValues(t *testing.T) {
	md, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(md)
	start := strings.Index(text, "## Bounds on options")
	end := strings.Index(text, "## Memory and the Go runtime")
	if start < 0 || end < start {
		t.Fatal(`docs/operations.md has no section "Bounds on options" before "Memory and the Go runtime"`)
	}
	pkg := "producer" // the producer table names its constants unqualified
	checked := 0
	for line := range strings.SplitSeq(text[start:end], "\n") {
		if strings.HasPrefix(line, "### ") && !strings.Contains(line, "Producer") {
			pkg = ""
		}
		m := boundRow.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(m[1], "`option") {
			continue
		}
		option, bound := m[1], m[2]
		var names []string
		for _, c := range strings.Split(m[3], ",") {
			c = strings.Trim(strings.TrimSpace(c), "`")
			if c == "" || strings.HasPrefix(c, "none") {
				continue
			}
			if !strings.Contains(c, ".") && pkg != "" {
				c = pkg + "." + c
			}
			names = append(names, c)
		}
		if len(names) == 0 {
			continue // a rule between fields, no constant
		}
		if names[len(names)-1] == "validate.NamePunctuation" {
			if !strings.Contains(bound, "`"+validate.NamePunctuation+"`") {
				t.Errorf("%s: the bound %q does not give validate.NamePunctuation, %q", option, bound, validate.NamePunctuation)
			}
			names = names[:len(names)-1]
		}
		u := upperBound.FindStringSubmatch(bound)
		if u == nil {
			t.Errorf("%s: no upper bound in %q", option, bound)
			continue
		}
		doc, err := strconv.ParseInt(u[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		switch u[2] {
		case "h":
			doc *= 3600e9
		case "m":
			doc *= 60e9
		case "s":
			doc *= 1e9
		}
		for _, name := range names {
			v, ok := boundConstants[name]
			if !ok {
				t.Errorf("%s: the table names %s, which this test does not know: add it to boundConstants", option, name)
				continue
			}
			checked++
			if v != doc {
				t.Errorf("%s: docs/operations.md gives the bound %s, %s is %d", option, strings.TrimSpace(u[0]), name, v)
			}
		}
	}
	if checked < len(boundConstants) {
		t.Errorf("checked %d bounds, want one for each of the %d constants the tables name", checked, len(boundConstants))
	}
}
