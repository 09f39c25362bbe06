package pulsartest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// Closing a consumer detaches it (Connected false) and hands its unacked
// messages to the next consumer; closing a producer is acknowledged.
func TestCloseConsumerAndProducer(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	c1, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	prod.Close()
	m := receive(t, ctx, c1)
	if err := c1.Ack(m); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "first ack", func() bool { return b.Backlog(topic, "s") == 2 })
	c1.Close()
	if st := b.Consumers(topic, "s"); len(st) != 1 || st[0].Connected || st[0].Active {
		t.Fatalf("after close: %+v", st)
	}
	c2, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for _, want := range []string{"1", "2"} {
		m := receive(t, ctx, c2)
		if string(m.Payload()) != want {
			t.Fatalf("got %q, want %q", m.Payload(), want)
		}
		_ = c2.Ack(m)
	}
	wait.For(t, "drained", func() bool { return b.Backlog(topic, "s") == 0 })
}

// The last message id is the newest entry (with its last batch index), and
// a reader uses it to know when it has read everything.
func TestLastMessageIDAndReader(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	ids, err := b.PublishBatch(ctx, topic, Message{Payload: []byte("b")}, Message{Payload: []byte("c")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	last, err := c.GetLastMessageIDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(last) != 1 || last[0].EntryID() != int64(ids[1].EntryID) || last[0].BatchIdx() != 1 || last[0].LedgerID() != int64(ids[1].LedgerID) {
		t.Fatalf("last ids %v, published %+v", last, ids)
	}
	r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for r.HasNext() {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(m.Payload()))
	}
	if strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("reader read %v", got)
	}
}

// A partitioned topic reports its partitions; producers spread keyed
// messages over them and a consumer on the base name reads every message,
// each id carrying its partition.
func TestPartitionedTopic(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	if err := b.CreateTopic(topic, 3); err != nil {
		t.Fatal(err)
	}
	parts, err := cl.TopicPartitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 || parts[2] != topic+"-partition-2" {
		t.Fatalf("partitions %v", parts)
	}
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 30
	for i := range n {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Key: fmt.Sprint("key-", i), Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	perPart := map[int32]int{}
	for range n {
		m := receive(t, ctx, c)
		seen[string(m.Payload())] = true
		perPart[m.ID().PartitionIdx()]++
		if !strings.HasSuffix(m.Topic(), fmt.Sprint("-partition-", m.ID().PartitionIdx())) {
			t.Fatalf("topic %s, id %v", m.Topic(), m.ID())
		}
		_ = c.Ack(m)
	}
	if len(seen) != n || len(perPart) < 2 {
		t.Fatalf("seen %d, per partition %v", len(seen), perPart)
	}
	if got := len(b.Messages(topic)); got != n {
		t.Fatalf("Messages(base) = %d", got)
	}
	wait.For(t, "acks on every partition", func() bool {
		total := 0
		for i := range 3 {
			for _, st := range b.Consumers(PartitionTopic(topic, i), "s") {
				total += int(st.Acked)
			}
		}
		return total == n && b.Backlog(topic, "s") == 0
	})
	if all := b.Consumers(topic, "s"); len(all) != 3 || all[2].Topic != PartitionTopic(topic, 2) {
		t.Fatalf("consumers by base name: %+v", all)
	}
	if err := b.CreateTopic(topic, 4); err == nil {
		t.Fatal("re-creating with another partition count succeeded")
	}
}

// The client's keep-alive pings are answered, so a client idle for many
// keep-alive intervals keeps its single connection. (The client drops a
// connection that received nothing for two intervals, so the interval is
// long enough for a busy machine to answer a ping well within it.)
func TestKeepAlive(t *testing.T) {
	b := startBroker(t)
	cl, err := pulsar.NewClient(pulsar.ClientOptions{
		URL: b.URL(), OperationTimeout: 5 * time.Second, KeepAliveInterval: 500 * time.Millisecond,
		Logger: plog.DefaultNopLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: uniqueTopic(t), SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wait.For(t, "pings", func() bool { return b.Stats().Pings >= 3 })
	if st := b.Stats(); st.ConnectionsAccepted != 1 || st.ConnectionsOpen != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A pattern subscription finds the namespace's topics, partitioned ones
// included, and consumes from all that match.
func TestPatternSubscription(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	if err := b.CreateTopic("orders-eu", 2); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"orders-us", "payments", "persistent://other/ns/orders-x"} {
		if err := b.CreateTopic(topic, 0); err != nil {
			t.Fatal(err)
		}
	}
	c, err := cl.Subscribe(pulsar.ConsumerOptions{TopicsPattern: "persistent://public/default/orders-.*", SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, topic := range []string{"orders-eu", "orders-us", "payments", "persistent://other/ns/orders-x"} {
		if _, err := b.Publish(ctx, topic, Message{Key: topic, Payload: []byte(topic)}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for range 2 {
		m := receive(t, ctx, c)
		got[string(m.Payload())] = true
		_ = c.Ack(m)
	}
	if !got["orders-eu"] || !got["orders-us"] {
		t.Fatalf("received %v", got)
	}
	noMessage(t, c, 100*time.Millisecond)
}

// Seek resets a durable subscription to a message id or a publish time:
// the consumer is closed by the broker, reconnects and reads again from
// there, acked or not. (pulsar-client-go itself skips the message it
// seeked to, as it does with a real broker.)
func TestSeek(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 5 {
		if _, err := b.Publish(ctx, topic, Message{Payload: []byte(fmt.Sprint(i)), PublishTime: time.UnixMilli(int64(1000 * (i + 1)))}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []pulsar.MessageID
	for range 5 {
		m := receive(t, ctx, c)
		ids = append(ids, m.ID())
		_ = c.Ack(m)
	}
	wait.For(t, "acks", func() bool { return b.Backlog(topic, "s") == 0 })
	if err := c.Seek(ids[1]); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2", "3", "4"} {
		m := receive(t, ctx, c)
		if string(m.Payload()) != want {
			t.Fatalf("after Seek got %q, want %q", m.Payload(), want)
		}
		_ = c.Ack(m)
	}
	if err := c.SeekByTime(time.UnixMilli(3000)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2", "3", "4"} {
		m := receive(t, ctx, c)
		if string(m.Payload()) != want {
			t.Fatalf("after SeekByTime got %q, want %q", m.Payload(), want)
		}
		_ = c.Ack(m)
	}
}

// GET_LAST_MESSAGE_ID carries the subscription's mark-delete position, as a
// real broker's does: a reader that seeked by time compares it with the
// last message id in HasNext. Without it pulsar-client-go (v0.21.0)
// dereferences nil there (consumer_partition.go hasNext) and the process
// crashes.
func TestReaderHasNextAfterSeekByTime(t *testing.T) {
	r := readerSeekedByTime(t)
	if !r.HasNext() {
		t.Fatal("HasNext after SeekByTime is false with two messages after that time")
	}
}

// A reader's SeekByTime moves its non-durable subscription, which survives
// the reconnection the seek forces (a real broker keeps the reset cursor),
// so the reader goes on from the time it seeked to, not from its start
// message id.
func TestReaderSeekByTimeKeepsPosition(t *testing.T) {
	r := readerSeekedByTime(t)
	ctx := ctxT(t)
	for _, want := range []string{"1", "2"} {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload()) != want {
			t.Fatalf("after SeekByTime read %q, want %q", m.Payload(), want)
		}
	}
}

// readerSeekedByTime returns a reader of a topic of messages "0", "1" and
// "2" published at 1, 2 and 3 seconds after the epoch, created at the
// earliest message and then seeked by time to 2 seconds; closed when t
// ends.
func readerSeekedByTime(t *testing.T) pulsar.Reader {
	t.Helper()
	b := startBroker(t)
	cl := newClient(t, b)
	topic := uniqueTopic(t)
	publishTimed(t, b, topic, 3)
	r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if err := r.SeekByTime(time.UnixMilli(2000)); err != nil {
		t.Fatal(err)
	}
	return r
}

// publishTimed publishes n messages "0".."n-1", message i published at
// (i+1) seconds after the epoch.
func publishTimed(t *testing.T, b *Broker, topic string, n int) {
	t.Helper()
	for i := range n {
		if _, err := b.Publish(context.Background(), topic, Message{Payload: []byte(fmt.Sprint(i)), PublishTime: time.UnixMilli(int64(1000 * (i + 1)))}); err != nil {
			t.Fatal(err)
		}
	}
}

// Guarantee: Stats counts the consumers and producers open now, on every
// topic and connection: each counts once it is created and stops counting
// once it is closed.
func TestStatsCountOpenConsumersAndProducers(t *testing.T) {
	b := startBroker(t)
	open := func(consumers, producers int) {
		t.Helper()
		if st := b.Stats(); st.ConsumersOpen != consumers || st.ProducersOpen != producers {
			t.Fatalf("stats %+v, want %d consumers and %d producers open", st, consumers, producers)
		}
	}
	open(0, 0)
	cl, other := newClient(t, b), newClient(t, b)
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topics: []string{uniqueTopic(t) + "-a", uniqueTopic(t) + "-b"}, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := other.CreateProducer(pulsar.ProducerOptions{Topic: uniqueTopic(t), SendTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	open(2, 1)
	c.Close()
	open(0, 1)
	p.Close()
	open(0, 0)
}

// CreateTopic of a topic that exists with another partition count (a
// partitioned one again with another count or as non-partitioned, a
// non-partitioned one as partitioned) returns an error wrapping
// ErrTopicExists; the same count again is a no-op; once the broker is
// closed it returns ErrClosed.
func TestCreateTopicWithAnotherPartitionCountWrapsErrTopicExists(t *testing.T) {
	b := startBroker(t)
	parted, plain := uniqueTopic(t), uniqueTopic(t)+"-plain"
	if err := b.CreateTopic(parted, 3); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic(plain, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic(parted, 3); err != nil {
		t.Errorf("CreateTopic with the same partition count = %v, want nil", err)
	}
	for _, c := range []struct {
		topic      string
		partitions int
	}{{parted, 4}, {parted, 0}, {plain, 2}} {
		if err := b.CreateTopic(c.topic, c.partitions); !errors.Is(err, ErrTopicExists) {
			t.Errorf("CreateTopic(%q, %d) = %v, want an error wrapping ErrTopicExists", c.topic, c.partitions, err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic(uniqueTopic(t), 2); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateTopic on a closed broker = %v, want ErrClosed", err)
	}
}
