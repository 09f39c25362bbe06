package observe

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/kafkatopology"
)

// Topology is what the Observer reads of a topology's source: every
// *topology.Source implements it, whatever its payload type, the one
// topology.NewDeadSource returns included.
type Topology interface {
	Stats() topology.Stats
}

// KafkaTopology is what the Observer reads of a Kafka topology backend:
// every *kafkatopology.Backend implements it, whatever its payload type.
type KafkaTopology interface {
	Stats() kafkatopology.Stats
}

type namedTopology struct {
	name string
	t    Topology
	g    *guard[topology.Stats]
}

type namedKafkaTopology struct {
	name string
	b    KafkaTopology
	g    *guard[kafkatopology.Stats]
}

const (
	lTopology = "topology"
	lBackend  = "backend"
	lReason   = "reason"
)

var (
	topologyReceived     = desc("topology_messages_received_total", "Letters the source took from the topology's queues.", lTopology)
	topologyAcked        = desc("topology_messages_acked_total", "Messages the pipeline acknowledged: done with.", lTopology)
	topologyRetried      = desc("topology_messages_retried_total", "Messages sent to a hold queue to be delivered again, counting a retry.", lTopology)
	topologyDeferred     = desc("topology_messages_deferred_total", "Messages sent to a hold queue without counting a retry.", lTopology)
	topologyRequeued     = desc("topology_messages_requeued_total", "Messages the pipeline's shutdown interrupted, delivered again at once.", lTopology)
	topologyDeadLettered = desc("topology_messages_dead_lettered_total", "Messages sent to the dead-letter queue (by a dead source: put back), by the reason of their death: rejected, max_retries, timeout, poisoned or other.", lTopology, lReason)
	topologyDiscarded    = desc("topology_messages_discarded_total", "Messages dropped with a warning: rejected without a dead-letter queue, or a broadcast retry.", lTopology)
	topologyPoisoned     = desc("topology_messages_poisoned_total", "Messages of a sequenced topology dead-lettered because their key was poisoned: the one that failed under FailAll and the later ones of its key.", lTopology)
	topologyHeldBack     = desc("topology_held_back_messages", "Messages of a sequenced topology waiting for an earlier message of their key.", lTopology)
	topologyPoisonedKeys = desc("topology_poisoned_keys", "Keys a sequenced FailAll source remembers as poisoned, each a map entry held until the consumer restarts or, on Kafka, a rebalance takes the key's partition from it.", lTopology)
	topologyRefused      = desc("topology_refused_letters", "Letters a full queue refused that the source keeps to hand off again; it takes no new letters while this is above 0.", lTopology)
	topologyHandOffKept  = desc("topology_hand_off_kept_letters", "Letters whose hand-off the backend failed that the source keeps, unsettled, to hand off again; at MaxHeldBack it takes no new letters.", lTopology)
	topologySubs         = desc("topology_subscriptions", "Readers the source holds open.", lTopology)
	topologySettleFailed = desc("topology_settle_failures_total", "Letters whose settling the backend refused, such as a Kafka topology's letters whose partition a rebalance took away first: the group delivers them again.", lTopology)
	topologyUndecodable  = desc("topology_undecodable_total", "Letters the source's readers skipped for good because they could not be decoded.", lTopology)
	topologyResubscribes = desc("topology_broadcast_resubscribes_total", "Times the source's broadcast readers subscribed again after losing their connection (per topic partition), each of which may have missed letters.", lTopology)

	releaseStalls    = desc("topology_release_stalls", "Hold topics, or partitions of them, whose release is stalled in the backend.", lBackend)
	releaseStalled   = desc("topology_release_stalled_seconds", "Time since the release of the hold partition stalled (partition -1: the whole hold topic).", lBackend, lTopic, lPartition)
	releaseFailures  = desc("topology_release_failures", "Failed attempts to release the hold partition since its stall began.", lBackend, lTopic, lPartition)
	holdsSkipped     = desc("topology_hold_records_skipped_total", "Records of hold topics the releasers skipped and committed past because they carry no valid due time, topic and group: written by something other than the backend, and lost to the topology.", lBackend)
	topologyLag      = desc("topology_kafka_lag_messages", "High-water mark minus the committed offset of a partition the backend's group readers claim (what a restart would read), or minus the position of a broadcast reader, labelled with no group (the letters it has not handed out).", lBackend, lGroup, lTopic, lPartition)
	topologyFetchLag = desc("topology_kafka_fetch_lag_messages", "High-water mark minus the next offset to fetch of a partition the backend's group or broadcast readers read: what is not fetched yet.", lBackend, lGroup, lTopic, lPartition)
	topologyFetching = desc("topology_kafka_fetch_failing", "1 while the fetches of a partition the backend's group or broadcast readers read fail (an ACL denies READ, the cluster is out of reach), its lag then growing only with the log ends listed; 0 while they do not.", lBackend, lGroup, lTopic, lPartition)
	holdWaiting      = desc("topology_hold_waiting_messages", "Letters waiting in a hold partition the backend's releasers claim, to be released when due: the retries' backlog there.", lBackend, lTopic, lPartition)
)

// topologyHandOffFailed counts Stats.HandOffFailed, topologyDeadLetterFailed
// Stats.DeadLetterFailed.
var (
	topologyHandOffFailed    = desc("topology_hand_off_failures_total", "Letters whose hand-off (hold, requeue, dead-letter, put back on the DLQ) the backend failed at least once, each delivery once: the source keeps them and hands them off again (hand_off_kept_letters).", lTopology)
	topologyDeadLetterFailed = desc("topology_dead_letter_failures_total", "Letters whose dead-lettering (by a dead source: putting back on the DLQ) the backend failed at least once, counted in hand_off_failures_total too; not an outcome: each counts in dead_lettered_total once the DLQ takes it.", lTopology)
)

var topologyDescs = []*prometheus.Desc{topologyReceived, topologyAcked, topologyRetried, topologyDeferred, topologyRequeued,
	topologyDeadLettered, topologyDiscarded, topologyPoisoned, topologyHeldBack, topologyPoisonedKeys, topologyRefused, topologyHandOffKept, topologySubs, topologySettleFailed, topologyHandOffFailed, topologyDeadLetterFailed,
	topologyUndecodable, topologyResubscribes, releaseStalls, releaseStalled, releaseFailures, holdsSkipped, topologyLag, topologyFetchLag, topologyFetching, holdWaiting}

// AddTopology adds a topology's source under name: its outcomes (acks,
// retries, deferrals, requeues, dead letters, discards, letters of
// poisoned keys), the letters it holds back or keeps for room, the keys
// it remembers as poisoned, the letters its readers skipped because they
// do not decode, and its readers become metrics labelled
// topology=name. Name each source of a topology apart:
// its topology's name for the source that feeds the pipeline, another
// ("orders-dlq") for the dead source that reads its DLQ. The source's
// pipeline must be added with Add for its health to count. A name already
// added is refused with an error wrapping ErrDuplicate; an empty name,
// or a nil t (or nil pointer), with an error wrapping ErrInvalid.
// AddTopology reads no Stats, and does not block; once Close is called,
// it returns ErrClosed.
func (o *Observer) AddTopology(name string, t Topology) error {
	return addNamed(o, &o.topologies, "topology", name, t, topologyName,
		namedTopology{name: name, t: t, g: new(guard[topology.Stats])})
}

// RemoveTopology removes the topology's source added under name, and
// reports whether there was one.
func (o *Observer) RemoveTopology(name string) bool {
	return removeNamed(o, &o.topologies, name, topologyName)
}

// AddKafkaTopology adds a Kafka topology backend under name: the hold
// topics, or partitions of them, whose release is stalled
// (kafkatopology.Stats.Stalled) become metrics labelled backend=name,
// topic and partition, one series per stall while it lasts, the hold
// records its releasers skipped (SkippedHoldRecords) a counter labelled
// backend=name, and the lag of each partition its group readers claim or
// its broadcast readers read (Partitions; a broadcast reader's with an
// empty group), and whether its fetches fail (FetchErr), gauges labelled
// backend=name, group, topic and partition, one series per partition
// while it is claimed, and the letters waiting in each hold partition
// its releasers claim (Holds) a gauge labelled
// backend=name, topic and partition. A name
// already added is refused with an error wrapping ErrDuplicate; an empty
// name, or a nil b (or nil pointer), with an error wrapping ErrInvalid.
// AddKafkaTopology reads no Stats, and does not block; once Close is
// called, it returns ErrClosed.
func (o *Observer) AddKafkaTopology(name string, b KafkaTopology) error {
	return addNamed(o, &o.kafkaTopologies, "Kafka topology backend", name, b, kafkaTopologyName,
		namedKafkaTopology{name: name, b: b, g: new(guard[kafkatopology.Stats])})
}

// RemoveKafkaTopology removes the Kafka topology backend added under
// name, and reports whether there was one.
func (o *Observer) RemoveKafkaTopology(name string) bool {
	return removeNamed(o, &o.kafkaTopologies, name, kafkaTopologyName)
}

func topologyName(n namedTopology) string { return n.name }

func kafkaTopologyName(n namedKafkaTopology) string { return n.name }

func collectTopology(ch chan<- prometheus.Metric, name string, st topology.Stats) {
	counter(ch, topologyReceived, float64(st.Received), name)
	counter(ch, topologyAcked, float64(st.Acked), name)
	counter(ch, topologyRetried, float64(st.Retried), name)
	counter(ch, topologyDeferred, float64(st.Deferred), name)
	counter(ch, topologyRequeued, float64(st.Requeued), name)
	d := st.DeadLetteredBy
	for _, r := range []struct {
		reason string
		n      uint64
	}{{string(topology.ReasonRejected), d.Rejected}, {string(topology.ReasonMaxRetries), d.MaxRetries},
		{string(topology.ReasonTimeout), d.Timeout}, {string(topology.ReasonPoisoned), d.Poisoned}, {"other", d.Other}} {
		counter(ch, topologyDeadLettered, float64(r.n), name, r.reason)
	}
	counter(ch, topologyDiscarded, float64(st.Discarded), name)
	counter(ch, topologyPoisoned, float64(st.Poisoned), name)
	gauge(ch, topologyHeldBack, float64(st.HeldBack), name)
	gauge(ch, topologyPoisonedKeys, float64(st.PoisonedKeys), name)
	gauge(ch, topologyRefused, float64(st.Refused), name)
	gauge(ch, topologyHandOffKept, float64(st.HandOffKept), name)
	gauge(ch, topologySubs, float64(st.Subscriptions), name)
	counter(ch, topologySettleFailed, float64(st.SettleFailed), name)
	counter(ch, topologyHandOffFailed, float64(st.HandOffFailed), name)
	counter(ch, topologyDeadLetterFailed, float64(st.DeadLetterFailed), name)
	counter(ch, topologyUndecodable, float64(st.Undecodable), name)
	counter(ch, topologyResubscribes, float64(st.BroadcastResubscribes), name)
}

// collectKafkaTopology sends the stalls of a Kafka topology backend, as
// of now: their count, and one series per hold topic and partition (the
// first stall of each, should the backend list one twice); the hold
// records it skipped; the lag of each partition its group readers
// claim or its broadcast readers read, and whether its fetches fail (the
// first listed of each group, topic and partition, should two readers
// list one at once: for broadcast readers, the one furthest behind); and the
// letters waiting in each hold partition its releasers claim (the first
// listed of each).
func collectKafkaTopology(ch chan<- prometheus.Metric, name string, st kafkatopology.Stats, now time.Time) {
	stalls := uniqueStalls(st.Stalled)
	gauge(ch, releaseStalls, float64(len(stalls)), name)
	counter(ch, holdsSkipped, float64(st.SkippedHoldRecords), name)
	for _, s := range stalls {
		part := partitionLabel(s.Partition)
		gauge(ch, releaseStalled, max(now.Sub(s.Since), 0).Seconds(), name, s.Topic, part)
		gauge(ch, releaseFailures, float64(s.Failures), name, s.Topic, part)
	}
	for _, p := range uniquePartitions(st.Partitions) {
		part := partitionLabel(p.Partition)
		gauge(ch, topologyLag, float64(p.Lag), name, p.Group, p.Topic, part)
		gauge(ch, topologyFetchLag, float64(p.FetchLag), name, p.Group, p.Topic, part)
		gauge(ch, topologyFetching, boolValue(p.FetchErr != nil), name, p.Group, p.Topic, part)
	}
	for _, h := range firstOfEach(st.Holds, func(h kafkatopology.HoldStats) stallKey { return stallKey{labelValue(h.Topic), h.Partition} }) {
		gauge(ch, holdWaiting, float64(h.Waiting), name, h.Topic, partitionLabel(h.Partition))
	}
}

// uniquePartitions returns parts without the partitions of a group and
// topic (as exported) listed before, whose series would be sent already
// (two readers of a group claim one partition at once for a moment of a
// rebalance; Stats lists the one furthest ahead first, so the figures
// exported do not flip between them from one scrape to the next).
func uniquePartitions(parts []kafkatopology.PartitionStats) []kafkatopology.PartitionStats {
	return firstOfEach(parts, func(p kafkatopology.PartitionStats) partitionKey {
		return partitionKey{labelValue(p.Group), labelValue(p.Topic), p.Partition}
	})
}

// uniqueStalls returns stalled without the stalls of a topic (as
// exported) and partition listed before, whose series would be sent
// already (a Backend lists each once; another KafkaTopology might not).
func uniqueStalls(stalled []kafkatopology.Stall) []kafkatopology.Stall {
	return firstOfEach(stalled, func(s kafkatopology.Stall) stallKey { return stallKey{labelValue(s.Topic), s.Partition} })
}

// firstOfEach returns xs without the elements whose key is that of one
// listed before; xs itself when it has fewer than two.
func firstOfEach[T any, K comparable](xs []T, key func(T) K) []T {
	if len(xs) < 2 {
		return xs
	}
	seen := make(map[K]struct{}, len(xs))
	out := make([]T, 0, len(xs))
	for _, x := range xs {
		k := key(x)
		if _, ok := seen[k]; !ok {
			seen[k] = struct{}{}
			out = append(out, x)
		}
	}
	return out
}

// stallKey is what tells the series of two stalls, or two hold
// partitions, apart.
type stallKey struct {
	topic     string
	partition int32
}

// TopologySnapshot is one topology source's topology.Stats, with the name
// it was added under.
type TopologySnapshot struct {
	// Name is the name the source was added under.
	Name string `json:"name"`
	topology.Stats
}

// KafkaTopologySnapshot is one Kafka topology backend's stalls, the
// partitions its group and broadcast readers read and the hold partitions its releasers
// claim, with the name it was added under.
type KafkaTopologySnapshot struct {
	// Backend is the name the backend was added under.
	Backend string `json:"backend"`
	// Stalled are its stalled releases (kafkatopology.Stats.Stalled).
	Stalled []StallSnapshot `json:"stalled"`
	// Partitions are the partitions its group readers claim and its
	// broadcast readers read (kafkatopology.Stats.Partitions).
	Partitions []PartitionSnapshot `json:"partitions"`
	// Holds are the hold partitions its releasers claim, with the
	// letters waiting there (kafkatopology.Stats.Holds).
	Holds []kafkatopology.HoldStats `json:"holds"`
}

// StallSnapshot is one kafkatopology.Stall, as JSON: Err is given as its
// message.
type StallSnapshot struct {
	// Topic, Partition, Offset, Since and Failures are the
	// kafkatopology.Stall's fields of those names.
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Since     time.Time `json:"since"`
	Failures  int       `json:"failures"`
	// Err is the Stall's Err, as its message.
	Err string `json:"err,omitempty"`
}

// PartitionSnapshot is one kafkatopology.PartitionStats, as JSON: its
// fields under their Go names, FetchErr given as its message.
type PartitionSnapshot struct {
	kafkatopology.PartitionStats
	// FetchErr is the PartitionStats' FetchErr, as its message: the
	// error of the partition's last failed fetch while its fetches fail,
	// "" otherwise. The backend takes its credentials out of it.
	FetchErr string `json:"FetchErr,omitempty"`
}

func kafkaTopologySnapshot(backend string, st kafkatopology.Stats) KafkaTopologySnapshot {
	snap := KafkaTopologySnapshot{Backend: backend, Stalled: make([]StallSnapshot, len(st.Stalled)),
		Partitions: make([]PartitionSnapshot, len(st.Partitions)),
		Holds:      append([]kafkatopology.HoldStats{}, st.Holds...)}
	for i, s := range st.Stalled {
		snap.Stalled[i] = StallSnapshot{Topic: s.Topic, Partition: s.Partition, Offset: s.Offset, Since: s.Since,
			Failures: s.Failures, Err: errString(s.Err)}
	}
	for i, p := range st.Partitions {
		snap.Partitions[i] = PartitionSnapshot{PartitionStats: p, FetchErr: errString(p.FetchErr)}
	}
	return snap
}
