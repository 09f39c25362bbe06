package kafkaalone

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// counter counts the records it is called on.
type counter struct{ n *int }

func (c counter) OnSend(*sarama.ProducerMessage) { *c.n++ }

// Guarantee: Config puts one record in each request, sent at once, leaves
// cfg as it was, and its interceptors are cfg's but for the records skip
// reports.
func TestConfigSendsOneRecordPerRequestAndSkipsTheRecordsSkipReports(t *testing.T) {
	cfg := sarama.NewConfig()
	cfg.Producer.Flush.Frequency = time.Second
	cfg.Producer.Flush.Bytes, cfg.Producer.Flush.Messages, cfg.Producer.Flush.MaxMessages = 1<<20, 100, 500
	var n int
	cfg.Producer.Interceptors = []sarama.ProducerInterceptor{counter{&n}}
	skipped := &sarama.ProducerMessage{Topic: "skipped"}
	c := Config(cfg, func(m *sarama.ProducerMessage) bool { return m == skipped })
	if f := c.Producer.Flush; f.Frequency != 0 || f.Bytes != 0 || f.Messages != 0 || f.MaxMessages != 1 {
		t.Fatalf("Flush = %+v, want one record per request, sent at once", f)
	}
	if f := cfg.Producer.Flush; f.MaxMessages != 500 || f.Messages != 100 {
		t.Fatalf("cfg's Flush = %+v, changed", f)
	}
	for _, in := range c.Producer.Interceptors {
		in.OnSend(skipped)
		in.OnSend(&sarama.ProducerMessage{Topic: "sent"})
	}
	if n != 1 {
		t.Fatalf("the interceptor was called %d times, want once: on the record skip does not report", n)
	}
	for _, in := range cfg.Producer.Interceptors {
		in.OnSend(skipped)
	}
	if n != 2 {
		t.Fatalf("cfg's interceptor skipped a record: called %d times in all, want 2", n)
	}
}
