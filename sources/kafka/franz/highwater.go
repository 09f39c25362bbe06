package franz

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/kafkaends"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

// errNotAnswered is why a partition whose leader answered a listing
// without it has no end offset listed.
var errNotAnswered = errors.New("kafka: the leader's answer left the partition out")

// listHighWaters is the member's claim.ListHighWaters: the end offsets
// of the claimed partitions a reader of the member's isolation level
// reads up to (read committed: the last stable offsets; uncommitted: the
// high-water marks), listed through the commit client, outside the group,
// which sends each broker one request for the partitions it leads. A
// failure leaves its partitions to the next listing, and is logged at
// DEBUG as the sarama source logs its listing's (kafkaends.SourceLines):
// a line per listing for a leader's request that failed or for leaders
// that could not be looked up (the topics' metadata, or a broker it
// names, not had), and for each partition whose leader is unknown or
// whose end its leader refused to list. With no claims it asks nothing:
// the commit client holds its connections for the commits anyway.
func (m *member) listHighWaters(ctx context.Context, cs []*claim.Claim) {
	if len(cs) == 0 {
		return
	}
	tps := make([]topicPartition, len(cs))
	byPart := make(map[kafkaends.Partition]*claim.Claim, len(cs))
	for i, c := range cs {
		tps[i] = topicPartition{c.Topic, c.Part}
		byPart[kafkaends.Partition{Topic: c.Topic, Part: c.Part}] = c
	}
	lines := kafkaends.SourceLines()
	for _, shard := range m.commits.RequestSharded(ctx, listOffsetsRequest(m.level, -1, tps)) {
		asked := askedPartitions(shard.Req)
		if shard.Err != nil {
			m.logListingFailed(lines, shard, asked)
			continue
		}
		resp, _ := shard.Resp.(*kmsg.ListOffsetsResponse)
		if resp == nil {
			resp = kmsg.NewPtrListOffsetsResponse()
		}
		listed := make(map[kafkaends.Partition]bool, len(asked))
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				k := kafkaends.Partition{Topic: t.Topic, Part: p.Partition}
				c := byPart[k]
				if c == nil || listed[k] {
					continue
				}
				listed[k] = true
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					lines.LogPartition(m.log, k, err)
					continue
				}
				c.NoteHighWater(listedOffset(&p))
			}
		}
		for _, k := range asked {
			if !listed[k] {
				lines.LogPartition(m.log, k, errNotAnswered)
			}
		}
	}
}

// logListingFailed logs the failure of shard, a listing of the partitions
// asked that had no answer: its leader's request failed (the shard names
// a broker), the metadata named no leader for them (a Kafka error for
// the partition or its topic), or the metadata, or the leader it named,
// could not be had.
func (m *member) logListingFailed(lines kafkaends.Lines, shard kgo.ResponseShard, asked []kafkaends.Partition) {
	err := claim.Flat(shard.Err)
	if shard.Meta.Host != "" {
		lines.LogBroker(m.log, net.JoinHostPort(shard.Meta.Host, strconv.Itoa(int(shard.Meta.Port))), err)
		return
	}
	if _, ok := errors.AsType[*kerr.Error](shard.Err); ok {
		for _, k := range asked {
			lines.LogNoLeader(m.log, k, err)
		}
		return
	}
	var topics []string
	for _, k := range asked {
		if !slices.Contains(topics, k.Topic) {
			topics = append(topics, k.Topic)
		}
	}
	slices.Sort(topics)
	lines.LogLookup(m.log, topics, err)
}

// askedPartitions are the partitions req, a ListOffsets request, asks
// for.
func askedPartitions(req kmsg.Request) []kafkaends.Partition {
	lr, _ := req.(*kmsg.ListOffsetsRequest)
	if lr == nil {
		return nil
	}
	var out []kafkaends.Partition
	for _, t := range lr.Topics {
		for _, p := range t.Partitions {
			out = append(out, kafkaends.Partition{Topic: t.Topic, Part: p.Partition})
		}
	}
	return out
}
