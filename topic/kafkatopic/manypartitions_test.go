package kafkatopic_test

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// produceToEach writes one record to each of the parts partitions of
// kname.
func produceToEach(t *testing.T, addrs []string, kname string, parts int32) {
	t.Helper()
	msgs := make([]*sarama.ProducerMessage, parts)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: kname, Partition: int32(i), Value: sarama.StringEncoder(strconv.Itoa(i))}
	}
	produceRecords(t, addrs, msgs)
}

// Guarantee: while the cluster cannot be reached, a broadcast subscriber
// of a topic of many partitions logs their fetch errors failing alike on
// one WARN line per cause, not one per partition; once the cluster
// answers again, each ends with one INFO line when the last of its
// partitions delivers a record, the INFO lines counting every partition
// (partitions_count) once.
func TestABroadcastSubscriberOfManyPartitionsOutOfReachLogsTheirFetchErrorsOnAFewLines(t *testing.T) {
	const parts = 128
	c := testbroker.Kafka(t)
	logs := &logtest.Lines{}
	o := testOptions[string](c, topic.StringCodec{})
	o.Partitions = parts
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	h := newTopic(t, newBackend(t, o), "outage-many", topic.Options{Mode: topic.BroadcastOnly})
	bs := subscribe(t, h, topic.Broadcast())

	all := func() string { return strings.Join(logs.All(), "") }
	testbroker.OutOfReach(t, c, "the broadcast subscriber's fetches to fail", func() bool {
		return logs.Count("level=WARN", "kafkatopic: broadcast consumer error") > 0
	}, all)
	produceToEach(t, c.ListenAddrs(), "outage-many", parts)
	for range parts {
		recv(t, bs)
	}

	warns := logs.Count("level=WARN", `msg="kafkatopic: broadcast consumer error"`)
	counted, ended := logs.Sum("partitions_count", "level=INFO", "kafkatopic: broadcast consumer error ended")
	if warns == 0 || warns > parts/16 || ended != warns || counted != parts {
		t.Errorf("%d partitions out of reach logged %d WARN lines for their fetch errors, %d INFO lines ending them counting %d partitions; want 1 to %d, as many INFO lines, counting the %d partitions:\n%s",
			parts, warns, ended, counted, parts/16, parts, all())
	}
	if rep := logs.Repeated(); len(rep) > 0 {
		t.Errorf("lines logged more than once: %q", rep)
	}
}
