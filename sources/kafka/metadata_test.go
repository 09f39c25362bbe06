package kafka_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: every metadata field describes the record: topic, partition,
// offset, key, headers in order, timestamp, generation, member and group.
func TestMetadataFields(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 2
		group := "g-md"
		c := newCluster(t, parts)
		prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(0))
		if err != nil {
			t.Fatal(err)
		}
		base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		const n = 10
		recs := make([]*kgo.Record, 0, n)
		for i := range n {
			s := strconv.Itoa(i)
			recs = append(recs, &kgo.Record{Topic: testTopic, Partition: int32(i % parts), Key: []byte("k" + s), Value: []byte("v" + s),
				Timestamp: base.Add(time.Duration(i) * time.Minute),
				Headers:   []kgo.RecordHeader{{Key: "a", Value: []byte("x" + s)}, {Key: "b", Value: []byte("y" + s)}}})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err = prod.ProduceSync(ctx, recs...).FirstErr()
		prod.Close()
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		got := map[string]kafka.Metadata{}
		keys := map[string]string{}
		l := newLedger()
		po := pipelineOpts("md", cl.new(t, sourceOptions(c, group)), 1, l, func(m *message.Message[[]byte]) error {
			md, _ := message.MetadataAs[*kafka.Metadata](m)
			mu.Lock()
			got[string(m.Data)] = *md
			keys[string(m.Data)] = m.PartitionKey()
			mu.Unlock()
			return nil
		})
		p := startPipeline(t, po)
		wait.Within(t, 20*time.Second, "every record", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == n })
		stopPipeline(t, p)
		for i := range n {
			s := strconv.Itoa(i)
			md, ok := got["v"+s]
			if !ok {
				t.Fatalf("record %d not seen", i)
			}
			if md.Topic != testTopic || md.Partition != int32(i%parts) || md.Offset != int64(i/parts) {
				t.Errorf("record %d: topic %q partition %d offset %d, want %q %d %d", i, md.Topic, md.Partition, md.Offset, testTopic, i%parts, i/parts)
			}
			// The ordering key routes a partition to one processor.
			if want := testTopic + "/" + strconv.Itoa(i%parts); keys["v"+s] != want {
				t.Errorf("record %d: partition key %q, want %q", i, keys["v"+s], want)
			}
			if string(md.Key) != "k"+s {
				t.Errorf("record %d: key %q", i, md.Key)
			}
			if len(md.Headers) != 2 || string(md.Headers[0].Key) != "a" || string(md.Headers[0].Value) != "x"+s ||
				string(md.Headers[1].Key) != "b" || string(md.Headers[1].Value) != "y"+s {
				t.Errorf("record %d: headers %q", i, md.Headers)
			}
			if want := base.Add(time.Duration(i) * time.Minute); !md.Timestamp.Equal(want) {
				t.Errorf("record %d: timestamp %v, want %v", i, md.Timestamp, want)
			}
			if md.GenerationID <= 0 || md.MemberID == "" {
				t.Errorf("record %d: generation %d member %q, want the claim's", i, md.GenerationID, md.MemberID)
			}
			if md.Group != group {
				t.Errorf("record %d: group %q, want %q", i, md.Group, group)
			}
		}
	})
}
