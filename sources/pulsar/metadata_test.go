package pulsar_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// Every metadata field is filled from the message, the same way for
// unbatched, batched, partitioned, keyed and chunked messages.
func TestMetadataFields(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.broker.CreateTopic("meta-part", 2); err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_700_000_000_123)
	t1 := time.UnixMilli(1_700_000_100_456)

	type sent struct {
		msg   pulsartest.Message
		id    pulsartest.MessageID
		topic string // concrete topic
		base  string
		batch bool
	}
	want := map[string]sent{}
	record := func(topic string, batch bool, msgs []pulsartest.Message, ids []pulsartest.MessageID) {
		for i, m := range msgs {
			concrete := pulsartest.FullTopicName(topic)
			if ids[i].Partition >= 0 {
				concrete = pulsartest.PartitionTopic(topic, int(ids[i].Partition))
			}
			want[string(m.Payload)] = sent{msg: m, id: ids[i], topic: concrete, base: pulsartest.FullTopicName(topic), batch: batch}
		}
	}
	plain := []pulsartest.Message{
		{Payload: []byte("plain-keyed"), Key: "k1", OrderingKey: "ok1", Properties: map[string]string{"a": "1", "b": "2"}, EventTime: t0, ProducerName: "prod-a", PublishTime: t1},
		{Payload: []byte("plain-bare"), ProducerName: "prod-a", PublishTime: t1},
	}
	ids, err := e.broker.Publish(ctx, "meta-plain", plain...)
	if err != nil {
		t.Fatal(err)
	}
	record("meta-plain", false, plain, ids)
	batch := []pulsartest.Message{
		{Payload: []byte("batch-0"), Key: "bk0", Properties: map[string]string{"i": "0"}, EventTime: t0, ProducerName: "prod-b", PublishTime: t1},
		{Payload: []byte("batch-1"), Key: "bk1", OrderingKey: "bo1", ProducerName: "prod-b", PublishTime: t1},
		{Payload: []byte("batch-2"), Properties: map[string]string{"i": "2"}, EventTime: t0.Add(time.Second), ProducerName: "prod-b", PublishTime: t1},
	}
	ids, err = e.broker.PublishBatch(ctx, "meta-batch", batch...)
	if err != nil {
		t.Fatal(err)
	}
	record("meta-batch", true, batch, ids)
	var parted []pulsartest.Message
	for i := range 6 {
		parted = append(parted, pulsartest.Message{Payload: fmt.Appendf(nil, "part-%d", i), Key: fmt.Sprintf("pk-%d", i), ProducerName: "prod-c", PublishTime: t1, EventTime: t0})
	}
	ids, err = e.broker.Publish(ctx, "meta-part", parted...)
	if err != nil {
		t.Fatal(err)
	}
	record("meta-part", false, parted, ids)
	partBatch := []pulsartest.Message{
		{Payload: []byte("pbatch-0"), Key: "same", ProducerName: "prod-d", PublishTime: t1},
		{Payload: []byte("pbatch-1"), Key: "same", ProducerName: "prod-d", PublishTime: t1},
	}
	ids, err = e.broker.PublishBatch(ctx, "meta-part", partBatch...)
	if err != nil {
		t.Fatal(err)
	}
	record("meta-part", true, partBatch, ids)

	// A chunked message, published by pulsar-client-go itself.
	prod, err := e.client.CreateProducer(pulsar.ProducerOptions{Topic: "meta-chunk", Name: "prod-chunk", EnableChunking: true,
		DisableBatching: true, ChunkMaxMessageSize: 1024, SendTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("c"), 5000)
	copy(big, "chunked:")
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: big, Key: "ck", Properties: map[string]string{"c": "1"}, EventTime: t0}); err != nil {
		t.Fatal(err)
	}
	prod.Close()

	r := newReceived()
	co := earliest()
	// pulsar-client-go starts a timer goroutine per chunked message that
	// lives for this long even after the message is complete; keep it short
	// so that goleak finds none left when the tests end.
	co.ExpireTimeOfIncompleteChunk = 100 * time.Millisecond
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"meta-plain", "meta-batch", "meta-part", "meta-chunk"},
		Subscription: "meta", Consumer: co, Logger: testLogger()})
	_, stop := run(t, src, 1, producer.Flow{}, recordAll(r))
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(want)+1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	_, metas := r.snapshot()
	if len(metas) != len(want)+1 {
		t.Fatalf("got %d messages, want %d", len(metas), len(want)+1)
	}
	for _, md := range metas {
		if md.Subscription != "meta" || md.RedeliveryCount != 0 || md.Raw == nil || md.MessageID == nil {
			t.Errorf("%s: subscription %q redelivery %d raw %v id %v", md.Raw.Payload(), md.Subscription, md.RedeliveryCount, md.Raw, md.MessageID)
		}
		payload := string(md.Raw.Payload())
		if bytes.HasPrefix(md.Raw.Payload(), []byte("chunked:")) {
			if md.Key != "ck" || md.Properties["c"] != "1" || !md.EventTime.Equal(t0) || md.ProducerName != "prod-chunk" ||
				md.Topic != pulsartest.FullTopicName("meta-chunk") || md.Partition != -1 || md.PublishTime.IsZero() || len(md.Raw.Payload()) != len(big) {
				t.Errorf("chunked message metadata %+v", md)
			}
			continue
		}
		w, ok := want[payload]
		if !ok {
			t.Errorf("unexpected message %q", payload)
			continue
		}
		m := w.msg
		if md.Key != m.Key || md.OrderingKey != m.OrderingKey || md.ProducerName != m.ProducerName {
			t.Errorf("%s: key %q ordering key %q producer %q, want %q %q %q", payload, md.Key, md.OrderingKey, md.ProducerName, m.Key, m.OrderingKey, m.ProducerName)
		}
		if len(m.Properties) > 0 && !maps.Equal(md.Properties, m.Properties) || len(m.Properties) == 0 && len(md.Properties) != 0 {
			t.Errorf("%s: properties %v, want %v", payload, md.Properties, m.Properties)
		}
		if !md.PublishTime.Equal(m.PublishTime) {
			t.Errorf("%s: publish time %v, want %v", payload, md.PublishTime, m.PublishTime)
		}
		if !md.EventTime.Equal(m.EventTime) || m.EventTime.IsZero() != md.EventTime.IsZero() {
			t.Errorf("%s: event time %v, want %v", payload, md.EventTime, m.EventTime)
		}
		if md.Topic != w.topic || md.BaseTopic != w.base || md.Partition != w.id.Partition || md.Partitioned() != (w.id.Partition >= 0) {
			t.Errorf("%s: topic %q base %q partition %d, want %q %q %d", payload, md.Topic, md.BaseTopic, md.Partition, w.topic, w.base, w.id.Partition)
		}
		idStr := fmt.Sprintf("%d:%d:%d", w.id.LedgerID, w.id.EntryID, w.id.Partition)
		if w.batch {
			idStr += fmt.Sprintf(":%d", w.id.BatchIndex)
		}
		if got := md.MessageIDString(); got != idStr {
			t.Errorf("%s: id %q, want %q", payload, got, idStr)
		}
	}
}

// A tombstone (a message published with no value) arrives with NullValue
// set and no data; a message with a value does not.
func TestMetadataReportsTombstones(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	prod, err := e.client.CreateProducer(pulsar.ProducerOptions{Topic: "tombstones", DisableBatching: true, SendTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Key: "gone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Key: "kept", Payload: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	type seen struct {
		null bool
		data []byte
	}
	got := make(chan map[string]seen, 1)
	got <- map[string]seen{}
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"tombstones"}, Subscription: "sub", Consumer: earliest()})
	_, stop := run(t, src, 1, producer.Flow{}, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		md, _ := message.MetadataAs[*bpulsar.Metadata](m)
		s := <-got
		s[md.Key] = seen{null: md.NullValue, data: m.Data}
		got <- s
		return m.Data, nil
	})
	wait.Within(t, waitLimit, "both messages handled", func() bool { s := <-got; n := len(s); got <- s; return n == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if g := s["gone"]; !g.null || g.data != nil {
		t.Errorf("tombstone: NullValue %v, data %q; want true and nil", g.null, g.data)
	}
	if k := s["kept"]; k.null || string(k.data) != "v" {
		t.Errorf("message with a value: NullValue %v, data %q; want false and \"v\"", k.null, k.data)
	}
}

// Guarantee: a message's metadata describes it for logs by its topic, its
// id as Pulsar prints it, its key and its redelivery count, so that the
// pipeline's failure line for it (message.Message.LogValue) locates it.
func TestMetadataLocatesTheMessageInLogs(t *testing.T) {
	md := &bpulsar.Metadata{Topic: "persistent://public/default/devices-partition-1", Partition: 1,
		MessageID: pulsar.NewMessageID(12, 34, -1, 1), Key: "dev-11", RedeliveryCount: 2}
	m := message.New([]byte("x"), nil, 1)
	m.Metadata = md
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Warn("message failed", slog.Any("message", m))
	for _, want := range []string{"message.source.topic=persistent://public/default/devices-partition-1",
		"message.source.message_id=12:34:1", "message.source.key=dev-11", "message.source.redelivery_count=2"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("line %q lacks %s", buf.String(), want)
		}
	}
	md.Key, md.RedeliveryCount = "", 0
	buf.Reset()
	slog.New(slog.NewTextHandler(&buf, nil)).Warn("message failed", slog.Any("message", m))
	if strings.Contains(buf.String(), "source.key") || strings.Contains(buf.String(), "redelivery_count") {
		t.Errorf("line %q names a key or redeliveries the message does not have", buf.String())
	}
}
