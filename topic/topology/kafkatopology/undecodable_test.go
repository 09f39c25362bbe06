package kafkatopology

import (
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a burst of records that do not decode on one partition (a
// value the codec refuses, a history header that breaks the rules) is
// logged in a few lines, for a group reader and for a broadcast reader:
// the first in full, the rest counted (held_back, with the first and the
// last offset held back) and said when the reader closes; the reader
// counts every one (Undecodable).
func TestABurstOfUndecodableRecordsIsLoggedInAFewLines(t *testing.T) {
	for _, broadcast := range []bool{false, true} {
		name := "group"
		if broadcast {
			name = "broadcast"
		}
		t.Run(name, func(t *testing.T) {
			var lines logtest.Lines
			b := newLoggedBackend(t, testbroker.Kafka(t).ListenAddrs(), &lines)
			tb := topology.New("garbage")
			if broadcast {
				tb = tb.Broadcast()
			}
			q := declare(t, b, tb)
			r := subscribe(t, q)
			const garbage = 200
			for i := range garbage {
				rec := &sarama.ProducerMessage{Topic: "garbage", Partition: 0, Value: sarama.StringEncoder("not json")}
				if i%2 == 1 {
					rec.Value = sarama.StringEncoder(`{"N":1}`)
					rec.Headers = []sarama.RecordHeader{header(HeaderShard, "-1")}
				}
				if err := b.send(rec); err != nil {
					t.Fatal(err)
				}
			}
			all := func() string { return strings.Join(lines.All(), "") }
			counter := r.(topology.UndecodableCounter)
			wait.Within(t, patience, "every record that does not decode counted", func() bool { return counter.Undecodable() == garbage }, all)
			topologytest.MustClose(t, "the reader", r.Close)
			if n := counter.Undecodable(); n != garbage {
				t.Fatalf("Undecodable() = %d once closed, want %d", n, garbage)
			}
			if records, told := lines.Told("record does not decode"); records > 3 || told != garbage {
				t.Errorf("%d lines telling of %d records, want at most 3 telling of %d:\n%s", records, told, garbage, all())
			}
			if lines.Count("record does not decode", "partition=0", logburst.HeldBackKey+"=", "held_back_first=", "held_back_last=") == 0 {
				t.Errorf("no line says which records were held back:\n%s", all())
			}
		})
	}
}
