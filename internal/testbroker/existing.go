package testbroker

import (
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
)

// ExistingTopic makes topic kname on c with parts partitions holding the
// values 1 to n as encode writes them, sent by a producer of its own
// before any backend declares the topic: value v on partition v%parts, so
// each partition holds its values in increasing order.
func ExistingTopic(t testing.TB, c *kfake.Cluster, kname string, parts int32, n int, encode func(v int) ([]byte, error)) {
	t.Helper()
	if err := c.CreateTopic(kname, parts, nil); err != nil {
		t.Fatal(err)
	}
	cfg := SaramaConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer(c.ListenAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, 0, n)
	for v := 1; v <= n; v++ {
		b, err := encode(v)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, &sarama.ProducerMessage{Topic: kname, Partition: int32(v) % parts, Value: sarama.ByteEncoder(b)})
	}
	if err := p.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
}

// LinesWith returns the lines of logs that hold one of msgs, without
// their line ends.
func LinesWith(logs string, msgs ...string) []string {
	var out []string
	for line := range strings.Lines(logs) {
		for _, m := range msgs {
			if strings.Contains(line, m) {
				out = append(out, strings.TrimSuffix(line, "\n"))
				break
			}
		}
	}
	return out
}
