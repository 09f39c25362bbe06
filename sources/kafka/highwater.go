package kafka

import (
	"context"

	"github.com/boulevard-go/boulevard/internal/kafkaends"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

// listHighWaters lists the end offsets of the member's claimed partitions
// every HighWaterInterval until the member's context ends
// (claim.Member.HighWaterLoop), with a kafkaends.Lister: one ListOffsets
// request per leader, on connections of its own within the member's, cut
// when a listing's context ends (its timeout, the member's Close), the
// leaders looked up on those connections, within the listing's context,
// when unknown or found stale; a listing of no claims closes them. Its
// failures are logged at DEBUG as the Kafka topic and topology backends
// log theirs: a line per listing for a broker's request or a lookup that
// failed, and for each partition whose leader is unknown or whose end a
// broker refused to list. A
// member whose handlers are stuck fetches nothing, and nothing else
// would refresh the client's metadata before its periodic refresh
// (Metadata.RefreshFrequency).
func (m *member) listHighWaters() {
	l := &kafkaends.Lister{Client: m.client, Conns: m.conns, Log: m.log, Clean: flat, Lines: kafkaends.SourceLines()}
	defer l.Close()
	m.cm.HighWaterLoop(m.ctx, m.opts.HighWaterInterval, func(ctx context.Context, cs []*claim.Claim) {
		read := make([]kafkaends.Partition, len(cs))
		for i, c := range cs {
			read[i] = kafkaends.Partition{Topic: c.Topic, Part: c.Part}
		}
		got := l.List(ctx, read)
		for i, c := range cs {
			if end, ok := got[read[i]]; ok {
				c.NoteHighWater(end)
			}
		}
	})
}
