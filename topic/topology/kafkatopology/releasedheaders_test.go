package kafkatopology

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a released letter reaches its main topic with the headers
// of its history and its group, without the hold's own (its due time and
// its release topic).
func TestAReleasedRecordCarriesNoHoldHeaders(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs())
	q := declare(t, b, topology.New("bare").Hold(time.Second))
	r := subscribe(t, q)
	if err := q.Hold(t.Context(), 0, topology.Letter[msg]{Value: msg{N: 1}, Retries: 1}); err != nil {
		t.Fatal(err)
	}
	receiveOne(t, r)
	cons, err := sarama.NewConsumer(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(q.(*queues[msg]).main, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var rec *sarama.ConsumerMessage
	select {
	case rec = <-pc.Messages():
	case <-time.After(30 * time.Second):
		t.Fatal("no record on the main topic")
	}
	got := map[string]string{}
	for _, h := range rec.Headers {
		got[string(h.Key)] = string(h.Value)
	}
	if got[HeaderRetries] != "1" || got[HeaderGroup] == "" {
		t.Errorf("the released record's headers %q lack its history or its group", got)
	}
	for _, k := range []string{HeaderDue, HeaderTopic} {
		if _, ok := got[k]; ok {
			t.Errorf("the released record carries the hold's header %s: %q", k, got)
		}
	}
}
