package kafkatopic_test

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// A value's event time becomes its record's timestamp, so a pipeline that
// publishes what it read keeps the time; without one the producer stamps
// the publish time.
func TestEventTimeIsTheRecordTimestamp(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	when := time.Date(2024, 2, 29, 12, 30, 0, 0, time.UTC)
	o.EventTime = func(v int) time.Time {
		if v == 1 {
			return when
		}
		return time.Time{}
	}
	b := newBackend(t, o)
	h := newTopic(t, b, "stamped", topic.Options{})
	before := time.Now().Add(-time.Minute)
	for _, v := range []int{1, 2} {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := sarama.NewConsumer(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(kafkatopic.KafkaTopic("stamped"), 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for _, want := range []int{1, 2} {
		select {
		case m := <-pc.Messages():
			v, err := topic.IntCodec{}.Decode(m.Value)
			if err != nil || v != want {
				t.Fatalf("record %d: value %d, %v", want, v, err)
			}
			switch {
			case want == 1 && !m.Timestamp.Equal(when):
				t.Fatalf("record 1 has timestamp %v, want the event time %v", m.Timestamp, when)
			case want == 2 && m.Timestamp.Before(before):
				t.Fatalf("record 2 has timestamp %v, want the publish time", m.Timestamp)
			}
		case <-ctxT(t).Done():
			t.Fatalf("record %d never read", want)
		}
	}
}
