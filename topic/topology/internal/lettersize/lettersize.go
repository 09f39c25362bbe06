// Package lettersize bounds what a hold or a dead-lettering adds to a
// letter's message on a broker: the entries its history and its Death
// travel in, each at its largest value. A broker backend keeps that much
// room under the broker's largest message when it takes a new letter, so
// that every letter it takes can still be held and dead-lettered.
package lettersize

import (
	"strconv"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// TimeBytes is the most bytes a time of a letter's history takes: RFC 3339
// with nanoseconds and a zone offset, of the years 0 to 9999.
const TimeBytes = len(time.RFC3339Nano)

// Keys are the names a backend writes a letter's history and Death under
// (Kafka headers, Pulsar properties), and how it writes a true
// Letter.Resume.
type Keys struct {
	Shard, Retries, FirstFailure, LastFailure, Resume string
	// Group names the consumer group a held letter is released to.
	Group string
	// The Death's entries.
	DeathReason, DeathError, DeathTopic, DeathGroup, DeathRetries, DeathFirstFailure, DeathLastFailure string
	// ResumeValue is the value of a true Letter.Resume.
	ResumeValue string
}

// Reserve returns the sum, over every entry of k, of entry(key, n), n the
// most bytes the entry's value takes for a letter of topology t: the shard
// and the retry counts at their bounds (topology.MaxRoutingShards-1,
// topology.MaxRetriesLimit), the times at TimeBytes, ResumeValue, t's
// consumer group, the longest Reason, a failure text at
// topology.MaxDeathErrorBytes (what topology.BoundDeathError keeps, its
// note included), t's name as a source writes it. It counts the
// entries a published letter may have already as well: a reserve, not a
// size.
func Reserve(k Keys, t *topology.Topology, entry func(key string, n int) int) int {
	retries := len(strconv.Itoa(topology.MaxRetriesLimit))
	reason := 0
	for _, r := range []topology.Reason{topology.ReasonRejected, topology.ReasonMaxRetries, topology.ReasonPoisoned, topology.ReasonTimeout} {
		reason = max(reason, len(r))
	}
	group := len(t.ConsumerGroup())
	return entry(k.Shard, len(strconv.Itoa(topology.MaxRoutingShards-1))) + entry(k.Retries, retries) +
		entry(k.FirstFailure, TimeBytes) + entry(k.LastFailure, TimeBytes) + entry(k.Resume, len(k.ResumeValue)) +
		entry(k.Group, group) +
		entry(k.DeathReason, reason) + entry(k.DeathError, topology.MaxDeathErrorBytes) +
		entry(k.DeathTopic, len(t.Name())) + entry(k.DeathGroup, group) + entry(k.DeathRetries, retries) +
		entry(k.DeathFirstFailure, TimeBytes) + entry(k.DeathLastFailure, TimeBytes)
}
