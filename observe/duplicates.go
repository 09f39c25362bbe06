package observe

import (
	"log/slog"

	"github.com/boulevard-go/boulevard/internal/logattr"
)

// dupKind is what a duplicate is of.
type dupKind uint8

const (
	// dupPipeline: two pipelines report one name (labels: the name).
	dupPipeline dupKind = iota
	// dupKafkaMember: two Kafka members report one group and stage
	// (labels: group, stage).
	dupKafkaMember
	// dupKafkaPartition: two Kafka members claim one partition (labels:
	// group, topic, partition).
	dupKafkaPartition
)

// duplicate is one set of series that two of the things added reported at
// one scrape, of which Collect sent one. It is comparable, so that it keys
// the map of the duplicates already logged without building a string.
type duplicate struct {
	kind   dupKind
	labels [3]string
}

// addDuplicate appends d to dups. A name that three pipelines report is
// appended twice and is one duplicate: logDuplicates counts it once (a
// search of dups here would cost O(n²) for n partitions claimed twice).
func addDuplicate(dups []duplicate, d duplicate) []duplicate {
	return append(dups, d)
}

// log writes d's line.
func (d duplicate) log(log *slog.Logger) {
	switch d.kind {
	case dupPipeline:
		log.Warn("two pipelines added report the same name; exporting the running one, else the one added last",
			slog.String("pipeline", d.labels[0]))
	case dupKafkaMember:
		log.Warn("two Kafka group members report the same group and stage; exporting the one of the newest generation",
			slog.String("group", d.labels[0]), slog.String("stage", d.labels[1]))
	}
}

// msgClaimedTwice is the line of the partitions of a group that a scrape
// first sees claimed by two members.
const msgClaimedTwice = "two Kafka group members claim the same partitions (a rebalance moving them); exporting the claims of the newest generation"

// logDuplicates logs each of dups that the previous scrape did not see,
// and remembers dups for the next: a duplicate that lasts is logged once,
// not at every scrape. The partitions of a group claimed twice that the
// scrape sees first are one line (a rebalance moves thousands at once):
// it names the first logattr.MaxListed and counts them all. A scrape
// without duplicates after one without costs nothing.
func (o *Observer) logDuplicates(dups []duplicate) {
	o.dupMu.Lock()
	defer o.dupMu.Unlock()
	if len(dups) == 0 && len(o.dups) == 0 {
		return
	}
	seen := make(map[duplicate]struct{}, len(dups))
	var groups []string           // of the new partitions claimed twice, in order
	var moved map[string][]string // group → its new partitions claimed twice
	for _, d := range dups {
		if _, ok := seen[d]; ok {
			continue
		}
		seen[d] = struct{}{}
		if _, ok := o.dups[d]; ok {
			continue
		}
		if d.kind != dupKafkaPartition {
			d.log(o.log)
			continue
		}
		if moved == nil {
			moved = map[string][]string{}
		}
		g := d.labels[0]
		if _, ok := moved[g]; !ok {
			groups = append(groups, g)
		}
		moved[g] = append(moved[g], d.labels[1]+"/"+d.labels[2])
	}
	for _, g := range groups {
		o.log.Info(msgClaimedTwice, slog.String("group", g), logattr.List("partitions", moved[g]))
	}
	o.dups = seen
}
