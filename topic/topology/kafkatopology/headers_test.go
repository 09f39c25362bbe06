package kafkatopology

import (
	"maps"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a record produced into a topology's main topic by something
// else delivers its headers as the letter's Headers (a traceparent among
// them), without the reserved ones, which are read as the letter's
// history.
func TestAnExternalRecordsHeadersAreItsHeaders(t *testing.T) {
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs())
	q := declare(t, b, topology.New("outside"))
	r := subscribe(t, q)
	want := topic.Headers{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "x-tenant": "acme"}
	rec := &sarama.ProducerMessage{Topic: "outside", Partition: 0, Value: sarama.StringEncoder(`{"N":1}`),
		Headers: []sarama.RecordHeader{header("traceparent", want["traceparent"]), header("x-tenant", want["x-tenant"]), header(HeaderRetries, "2")}}
	if err := b.send(rec); err != nil {
		t.Fatal(err)
	}
	buf := make([]topology.Letter[topologytest.Msg], 1)
	if n, err := r.Receive(t.Context(), buf); err != nil || n != 1 {
		t.Fatalf("Receive = %d, %v", n, err)
	}
	if !maps.Equal(buf[0].Headers, want) || buf[0].Retries != 2 {
		t.Errorf("letter headers %v, retries %d; want %v and 2", buf[0].Headers, buf[0].Retries, want)
	}
}

// Guarantee: reading the headers of a record without headers of its
// own (a history only) allocates no more than reading a record without
// any: a letter's Headers cost only when it has some.
func TestReadingARecordWithoutHeadersOfItsOwnAllocatesNothing(t *testing.T) {
	rec := &sarama.ConsumerMessage{}
	for _, h := range letterHeaders(&topology.Letter[topologytest.Msg]{Shard: 3, Retries: 2}, nil) {
		rec.Headers = append(rec.Headers, &h)
	}
	var l topology.Letter[topologytest.Msg]
	read := func(rec *sarama.ConsumerMessage) float64 {
		return testing.AllocsPerRun(100, func() {
			l = topology.Letter[topologytest.Msg]{}
			if _, err := readHeaders(rec, &l); err != nil {
				t.Fatal(err)
			}
		})
	}
	base := read(&sarama.ConsumerMessage{})
	if n := read(rec); n != base {
		t.Errorf("%.2f allocations reading a record's history, want %.2f, as for a record without headers", n, base)
	}
	if l.Retries != 2 || l.Headers != nil {
		t.Errorf("read Retries %d, Headers %v; want 2 and nil", l.Retries, l.Headers)
	}
}
