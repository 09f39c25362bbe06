package observe

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/topic"
)

var (
	kafkaLag        = desc("kafka_consumer_lag_messages", "High-water mark (the latest fetch's, or the end offset listed every HighWaterInterval when higher) minus the group's committed offset: what a restart would read.", lGroup, lTopic, lPartition)
	kafkaFetchLag   = desc("kafka_fetch_lag_messages", "High-water mark minus the next offset to fetch: what is not fetched yet.", lGroup, lTopic, lPartition)
	kafkaCommitted  = desc("kafka_committed_offset", "The offset the broker last accepted for the group; -1 when none.", lGroup, lTopic, lPartition)
	kafkaHighWater  = desc("kafka_high_water_offset", "The partition's high-water mark, or for a reader of committed records its last stable offset where its client reports it: the latest fetch's, or the end offset listed every HighWaterInterval when higher.", lGroup, lTopic, lPartition)
	kafkaInFlight   = desc("kafka_in_flight_messages", "Records delivered to the pipeline whose outcome has not reached the claim.", lGroup, lTopic, lPartition)
	kafkaFailedPast = desc("kafka_failed_committed_total", "Failed messages the failure policy commit committed past since the partition was claimed: they are not delivered again.", lGroup, lTopic, lPartition)
	kafkaAssigned   = desc("kafka_assigned_partitions", "Partitions the group member claims.", lGroup, lStage)
	kafkaGeneration = desc("kafka_generation", "Group generation of the member's latest session; -1 before its first join.", lGroup, lStage)
	kafkaRebalances = desc("kafka_rebalances_total", "Group generations the member took part in.", lGroup, lStage)
	kafkaCommits    = desc("kafka_commits_total", "OffsetCommit requests the broker answered.", lGroup, lStage)
	kafkaCommitErrs = desc("kafka_commit_errors_total", "Commits the broker did not accept, or that could not be sent.", lGroup, lStage)

	topicPublished    = desc("topic_published_total", "Publishes that did not fail or get dropped.", lTopic)
	topicDropped      = desc("topic_dropped_total", "Publishes dropped because the topic was full.", lTopic)
	topicLagged       = desc("topic_lagged_total", "Broadcast messages missed by slow subscribers.", lTopic)
	topicInFlight     = desc("topic_in_flight_publishes", "Tracked publishes not resolved yet.", lTopic)
	topicGroups       = desc("topic_balanced_groups", "Consumer groups with subscribers.", lTopic)
	topicSubscribers  = desc("topic_broadcast_subscribers", "Connected broadcast subscribers.", lTopic)
	topicUndecodable  = desc("topic_undecodable_total", "Messages this process's subscriptions skipped for good because the codec could not decode them.", lTopic)
	topicResubscribes = desc("topic_broadcast_resubscribes_total", "Times this process's broadcast subscribers subscribed again after losing their connection, each maybe missing what was published meanwhile.", lTopic)
	topicLag          = desc("topic_lag_messages", "High-water mark (the latest fetch's, or the log end listed every HighWaterInterval when higher) minus the committed offset of a partition this process's balanced subscribers claim (what a restart would read), or minus the position of a broadcast subscriber, labelled with no group (the messages it has not received); where several read one partition, the broadcast subscriber furthest behind, or the group's member furthest ahead (two claim it for a moment of a rebalance).", lTopic, lGroup, lPartition)
	topicCommitted    = desc("topic_committed_offset", "The offset a balanced subscriber's group commits for the partition (-1: none), or a broadcast subscriber's position.", lTopic, lGroup, lPartition)
	topicHighWater    = desc("topic_high_water_offset", "The partition's high-water mark: the latest fetch's, or the log end listed every HighWaterInterval when higher.", lTopic, lGroup, lPartition)
	topicFetching     = desc("topic_fetch_failing", "1 while the fetches of a partition this process's subscribers read fail (an ACL denies READ, the cluster is out of reach), its lag then growing only with the log ends listed; 0 while they do not.", lTopic, lGroup, lPartition)
)

var kafkaDescs = []*prometheus.Desc{kafkaLag, kafkaFetchLag, kafkaCommitted, kafkaHighWater, kafkaInFlight, kafkaFailedPast,
	kafkaAssigned, kafkaGeneration, kafkaRebalances, kafkaCommits, kafkaCommitErrs}

var topicDescs = []*prometheus.Desc{topicPublished, topicDropped, topicLagged, topicInFlight, topicGroups, topicSubscribers, topicUndecodable, topicResubscribes,
	topicLag, topicCommitted, topicHighWater, topicFetching}

// memberKey identifies the series of a Kafka group member, and
// partitionKey those of a claimed partition (label values as exported).
type (
	memberKey struct {
		group, stage string
	}
	partitionKey struct {
		group, topic string
		partition    int32
	}
)

// kafkaClaim locates a member (partition -1) or one of its claims in the
// stats of the Kafka sources, and the group generation it belongs to.
type kafkaClaim struct {
	source, member, partition int
	generation                int32
}

// kafkaSelection is the stats of the Kafka sources (group names as
// exported) and which member, and which claim, each member's and each
// partition's series come from (see Collect). /metrics and /stats report
// this choice.
type kafkaSelection struct {
	stats   []kafka.Stats
	members map[memberKey]kafkaClaim
	parts   map[partitionKey]kafkaClaim
}

// selectKafka takes the stats of the Kafka sources and chooses, for each member's
// and each partition's series, the member or claim of the newest group
// generation (the one read first among equals). It returns dups with the
// series reported twice.
func selectKafka(sources []kafka.Stats, dups []duplicate) (kafkaSelection, []duplicate) {
	sel := kafkaSelection{
		stats:   make([]kafka.Stats, len(sources)),
		members: map[memberKey]kafkaClaim{},
		parts:   map[partitionKey]kafkaClaim{},
	}
	for si, st := range sources {
		st.GroupID = labelValue(st.GroupID)
		sel.stats[si] = st
		for mi, m := range st.Members {
			mk := memberKey{st.GroupID, labelValue(m.Stage)}
			w, ok := sel.members[mk]
			if ok {
				dups = addDuplicate(dups, duplicate{kind: dupKafkaMember, labels: [3]string{mk.group, mk.stage}})
			}
			if !ok || m.GenerationID > w.generation {
				sel.members[mk] = kafkaClaim{si, mi, -1, m.GenerationID}
			}
			for pi, p := range m.Partitions {
				pk := partitionKey{st.GroupID, labelValue(p.Topic), p.Partition}
				w, ok := sel.parts[pk]
				if ok {
					dups = addDuplicate(dups, duplicate{kind: dupKafkaPartition, labels: [3]string{pk.group, pk.topic, partitionLabel(pk.partition)}})
				}
				if !ok || p.GenerationID > w.generation {
					sel.parts[pk] = kafkaClaim{si, mi, pi, p.GenerationID}
				}
			}
		}
	}
	return sel, dups
}

// member reports whether the series of the member mi of the source si
// come from it.
func (sel *kafkaSelection) member(si, mi int) bool {
	st := &sel.stats[si]
	w := sel.members[memberKey{st.GroupID, labelValue(st.Members[mi].Stage)}]
	return w.source == si && w.member == mi
}

// partition reports whether the series of the partition pi of the member
// mi of the source si come from that claim.
func (sel *kafkaSelection) partition(si, mi, pi int) bool {
	st := &sel.stats[si]
	p := &st.Members[mi].Partitions[pi]
	w := sel.parts[partitionKey{st.GroupID, labelValue(p.Topic), p.Partition}]
	return w.source == si && w.member == mi && w.partition == pi
}

// collectKafka sends the metrics of the Kafka sources, each member's and
// each partition's series once (see Collect), and returns dups with the
// series reported twice.
func collectKafka(ch chan<- prometheus.Metric, sources []kafka.Stats, dups []duplicate) []duplicate {
	if len(sources) == 0 {
		return dups
	}
	sel, dups := selectKafka(sources, dups)
	for si, st := range sel.stats {
		g := st.GroupID
		for mi, m := range st.Members {
			if sel.member(si, mi) {
				gauge(ch, kafkaAssigned, float64(len(m.Partitions)), g, m.Stage)
				gauge(ch, kafkaGeneration, float64(m.GenerationID), g, m.Stage)
				counter(ch, kafkaRebalances, float64(m.Rebalances), g, m.Stage)
				counter(ch, kafkaCommits, float64(m.Commits), g, m.Stage)
				counter(ch, kafkaCommitErrs, float64(m.CommitErrors), g, m.Stage)
			}
			for pi, p := range m.Partitions {
				if !sel.partition(si, mi, pi) {
					continue
				}
				part := partitionLabel(p.Partition)
				gauge(ch, kafkaLag, float64(p.Lag), g, p.Topic, part)
				gauge(ch, kafkaFetchLag, float64(p.FetchLag), g, p.Topic, part)
				gauge(ch, kafkaCommitted, float64(p.Committed), g, p.Topic, part)
				gauge(ch, kafkaHighWater, float64(p.HighWater), g, p.Topic, part)
				gauge(ch, kafkaInFlight, float64(p.InFlight), g, p.Topic, part)
				counter(ch, kafkaFailedPast, float64(p.FailedCommitted), g, p.Topic, part)
			}
		}
	}
	return dups
}

// kafkaStats returns the stats of sources as /metrics reports them (see
// selectKafka): each member with only the claims whose series come from
// it, and only when its own series or one of those claims' do; each
// source unless every one of its members is left out.
func kafkaStats(sources []kafka.Stats) []kafka.Stats {
	out := make([]kafka.Stats, 0, len(sources))
	sel, _ := selectKafka(sources, nil)
	for si, st := range sel.stats {
		members := make([]kafka.MemberStats, 0, len(st.Members))
		for mi, m := range st.Members {
			var parts []kafka.PartitionStats
			for pi, p := range m.Partitions {
				if sel.partition(si, mi, pi) {
					parts = append(parts, p)
				}
			}
			if len(parts) == 0 && !sel.member(si, mi) {
				continue
			}
			if len(parts) < len(m.Partitions) {
				m.Partitions = parts
			}
			members = append(members, m)
		}
		if len(members) == 0 && len(st.Members) > 0 {
			continue
		}
		st.Members = members
		out = append(out, st)
	}
	return out
}

func collectTopic(ch chan<- prometheus.Metric, t namedTopic, st topic.Stats) {
	name := t.name
	counter(ch, topicPublished, float64(raise(t.published, st.Published)), name)
	counter(ch, topicDropped, float64(st.Dropped), name)
	counter(ch, topicLagged, float64(st.Lagged), name)
	gauge(ch, topicInFlight, float64(st.InFlight), name)
	gauge(ch, topicGroups, float64(st.BalancedGroups), name)
	gauge(ch, topicSubscribers, float64(st.BroadcastSubscribers), name)
	counter(ch, topicUndecodable, float64(st.Undecodable), name)
	counter(ch, topicResubscribes, float64(st.BroadcastResubscribes), name)
	// One series per group and partition (the first listed: a group's
	// member furthest ahead, the broadcast subscriber furthest behind)
	// while it is read.
	for _, p := range firstOfEach(st.Partitions, func(p topic.PartitionStats) partitionKey {
		return partitionKey{group: labelValue(p.Group), partition: p.Partition}
	}) {
		part := partitionLabel(p.Partition)
		gauge(ch, topicLag, float64(p.Lag), name, p.Group, part)
		gauge(ch, topicCommitted, float64(p.Committed), name, p.Group, part)
		gauge(ch, topicHighWater, float64(p.HighWater), name, p.Group, part)
		gauge(ch, topicFetching, boolValue(p.FetchErr != nil), name, p.Group, part)
	}
}

// raise returns the larger of v and the highest value hw has held, and
// keeps it in hw. topic.Stats counts a publish when it starts and takes it
// back if it then fails or is dropped, so its Published can go down by the
// publishes that were waiting; a Prometheus counter must not (a decrease
// reads as a reset, and rate() would count the whole counter again).
func raise(hw *atomic.Uint64, v uint64) uint64 {
	for {
		old := hw.Load()
		if v <= old {
			return old
		}
		if hw.CompareAndSwap(old, v) {
			return v
		}
	}
}
