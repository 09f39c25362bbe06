package testbroker

import (
	"encoding/binary"
	"hash/crc32"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CorruptBatch is a one-record batch (magic 2) at offset at whose CRC does
// not match its content, as a damaged log segment serves it. Its bytes are
// the same on every call.
func CorruptBatch(at int64) []byte {
	r := kmsg.NewRecord()
	r.Value = []byte("corrupt")
	r.Length = int32(len(r.AppendTo(nil)) - 1) // the content after the one-byte length 0
	b := kmsg.NewRecordBatch()
	b.FirstOffset = at
	b.Magic = 2
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = -1, -1, -1
	b.FirstTimestamp, b.MaxTimestamp = 1_700_000_000_000, 1_700_000_000_000
	b.NumRecords = 1
	b.Records = r.AppendTo(nil)
	b.Length = int32(len(b.AppendTo(nil)) - 12)
	raw := b.AppendTo(nil)
	crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(raw[17:], crc^0xff)
	return raw
}

// ServeCorruptBatch makes c answer every Fetch that asks for partition part
// of topic from offset at with CorruptBatch(at) alone (kfake checks the CRC
// of what is produced, so a corrupt batch cannot be stored), until c
// closes; it handles every other Fetch as usual. A Fetch that asks for
// other partitions too gets no answer for them in that response, so the
// topic should have the one partition, or the others be read elsewhere.
// It returns the count of such answers so far.
func ServeCorruptBatch(c *kfake.Cluster, topic string, part int32, at int64) *atomic.Int64 {
	id := c.TopicInfo(topic).TopicID
	n := new(atomic.Int64)
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		hit := false
		for _, rt := range req.Topics {
			if rt.Topic != topic && rt.TopicID != id {
				continue
			}
			for _, rp := range rt.Partitions {
				hit = hit || rp.Partition == part && rp.FetchOffset == at
			}
		}
		if !hit {
			return nil, nil, false
		}
		n.Add(1)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.Version = req.Version
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = part
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = at+1, at+1, 0
		rp.RecordBatches = CorruptBatch(at)
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	return n
}
