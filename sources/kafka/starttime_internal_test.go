package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
)

// startClaim is the part of a group claim startOffset reads.
type startClaim struct {
	sarama.ConsumerGroupClaim
	part int32
	init int64
}

func (c startClaim) Topic() string              { return "events" }
func (c startClaim) Partition() int32           { return c.part }
func (c startClaim) InitialOffset() int64       { return c.init }
func (c startClaim) HighWaterMarkOffset() int64 { return 0 }

// Guarantee: a record stamped at or after StartTime and appended after the
// listing by time found none, but before the end offset is listed, is where
// the claim starts (it is not skipped); a partition with no such record
// starts at its end, one with such a record from the start at that record,
// and with BeginReset a committed partition starts there too.
func TestStartOffsetKeepsRecordAppendedDuringLookup(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pr, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	appendAt := func(part int32, at time.Time) {
		t.Helper()
		r := &kgo.Record{Topic: "events", Partition: part, Value: []byte("v"), Timestamp: at}
		if err := pr.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// 5+p records an hour old on each partition p, one more at the start
	// time on partition 2 (offset 7).
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for part := range int32(3) {
		for i := range 5 + int(part) {
			appendAt(part, base.Add(time.Duration(i)*time.Second))
		}
	}
	start := base.Add(time.Minute)
	appendAt(2, start)

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	conns := kafkaconn.New(cfg)
	conns.Use(cfg)
	sc, err := sarama.NewClient(c.ListenAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()

	for _, tc := range []struct {
		name  string
		begin string
		cl    startClaim
		after int32 // the partition a record is appended to before the end listing, -1 for none
		want  int64
	}{
		{"appended during the lookup", BeginCommitted, startClaim{part: 0, init: -1}, 0, 5},
		{"none that late", BeginCommitted, startClaim{part: 1, init: -1}, -1, 6},
		{"found at once", BeginCommitted, startClaim{part: 2, init: -1}, -1, 7},
		{"reset past the commit", BeginReset, startClaim{part: 1, init: 2}, 1, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ends := 0
			beforeEndListing = func() {
				if ends++; ends == 1 && tc.after >= 0 {
					appendAt(tc.after, start.Add(time.Second))
				}
			}
			t.Cleanup(func() { beforeEndListing = nil })
			m := &member{client: sc, conns: conns, opts: &Options{InitialOffset: OffsetTimestamp, StartTime: start, BeginOffset: tc.begin}}
			got, move, err := m.startOffset(context.Background(), tc.cl)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || !move {
				t.Fatalf("the claim starts at %d (moved %v), want %d (moved)", got, move, tc.want)
			}
		})
	}
}
