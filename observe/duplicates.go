package observe

import (
	"log/slog"
	"slices"
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

// addDuplicate appends d to dups unless it is there already (a name that
// three pipelines report is one duplicate).
func addDuplicate(dups []duplicate, d duplicate) []duplicate {
	if slices.Contains(dups, d) {
		return dups
	}
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
	case dupKafkaPartition:
		log.Info("two Kafka group members claim the same partition (a rebalance moving it); exporting the claim of the newest generation",
			slog.String("group", d.labels[0]), slog.String("topic", d.labels[1]), slog.String("partition", d.labels[2]))
	}
}

// logDuplicates logs each of dups that the previous scrape did not see,
// and remembers dups for the next: a duplicate that lasts is logged once,
// not at every scrape. A scrape without duplicates after one without
// costs nothing.
func (o *Observer) logDuplicates(dups []duplicate) {
	o.dupMu.Lock()
	defer o.dupMu.Unlock()
	if len(dups) == 0 && len(o.dups) == 0 {
		return
	}
	seen := make(map[duplicate]struct{}, len(dups))
	for _, d := range dups {
		if _, ok := o.dups[d]; !ok {
			d.log(o.log)
		}
		seen[d] = struct{}{}
	}
	o.dups = seen
}
