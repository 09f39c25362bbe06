package pulsartest

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Message is one message stored on a topic, as published through the test
// API or by a client.
type Message struct {
	// Key is the partition key; OrderingKey the ordering key.
	Key, OrderingKey string
	// Payload is the message's bytes.
	Payload []byte
	// Properties are the message's user properties (nil when it has none).
	Properties map[string]string
	// EventTime is zero when the message has none.
	EventTime time.Time
	// ProducerName defaults to "pulsartest" when publishing through the API.
	ProducerName string
	// PublishTime defaults to now when publishing through the API.
	PublishTime time.Time
	// DeliverAt delays delivery on shared and key-shared subscriptions
	// (zero: deliver at once).
	DeliverAt time.Time
	// ID is set by Messages and ignored by Publish.
	ID MessageID
}

// MessageID identifies a stored message.
type MessageID struct {
	// LedgerID and EntryID locate the stored entry.
	LedgerID, EntryID uint64
	// Partition is the partition index, -1 for a non-partitioned topic.
	Partition int32
	// BatchIndex is the index within a batched entry, -1 when unbatched.
	BatchIndex int32
}

// String formats the id like pulsar-client-go: "ledger:entry:partition".
func (id MessageID) String() string {
	return fmt.Sprintf("%d:%d:%d", id.LedgerID, id.EntryID, id.Partition)
}

// MaxFlowsRecorded is how many FLOW commands ConsumerStats.Flows lists for
// one consumer: a client that sends more costs the broker no more memory.
const MaxFlowsRecorded = 10000

// ConsumerStats is what the broker observed of one consumer. Counts are in
// messages: a batch entry of n messages counts n.
type ConsumerStats struct {
	// ConsumerID is the id the client gave the consumer on its
	// connection, Name the consumer's name, Topic and Subscription what
	// it subscribed to.
	ConsumerID   uint64
	Name         string
	Topic        string
	Subscription string
	// SubType is "Exclusive", "Shared", "Failover" or "Key_Shared".
	SubType string
	// Flows lists the permit count of each FLOW command, in order: the
	// first MaxFlowsRecorded of them. FlowsOmitted counts the FLOW
	// commands after those, which are not listed.
	Flows        []uint32
	FlowsOmitted int64
	// PermitsGranted is the sum of every FLOW command's permits (of
	// Flows, when FlowsOmitted is 0), at most math.MaxInt64; Available
	// stops there too.
	PermitsGranted int64
	// Available is permits not yet used. It goes negative when batches
	// were sent past the permits, as a real broker sends them (a whole
	// read of up to min(permits, 100) entries; on Shared, one turn of at
	// least one entry); with Options.StrictBatchPermits, only when an
	// entry larger than half of MaxAvailable was sent on a partial budget.
	Available int64
	// MaxAvailable is the highest Available ever reached: the consumer's
	// read-ahead bound.
	MaxAvailable int64
	// Dispatched counts messages pushed, Acked messages acknowledged,
	// Nacked messages the consumer asked to have redelivered, Redelivered
	// messages pushed again after a nack, an ack timeout, a consumer leaving
	// or a failover switch.
	Dispatched, Acked, Nacked, Redelivered int64
	// Active is true for the consumer that receives messages on an
	// exclusive or failover subscription, and for every connected consumer
	// of a shared or key-shared one.
	Active bool
	// Connected is false once the consumer closed, unsubscribed or lost its
	// connection.
	Connected bool
}

// CreateTopic creates topic with the given number of partitions (0 =
// non-partitioned). Short names get persistent://public/default/. Creating
// an existing topic with the same partition count is a no-op; with another
// count it returns an error wrapping ErrTopicExists, and on a closed Broker
// ErrClosed. Clients create non-partitioned topics on first use, so
// CreateTopic is needed only for partitioned topics or to make Messages
// find an unused topic.
func (b *Broker) CreateTopic(topic string, partitions int) error {
	if partitions < 0 {
		return fmt.Errorf("pulsartest: CreateTopic %q: partitions must be ≥ 0, got %d", topic, partitions)
	}
	return b.change(topic, func(tn topicName) error {
		cur, isPart := b.partitioned[tn.full]
		_, isPlain := b.topics[tn.full]
		switch {
		case partitions == 0 && isPart, partitions > 0 && isPart && cur != partitions, partitions > 0 && isPlain:
			return fmt.Errorf("%w: %s", ErrTopicExists, tn.full)
		}
		if partitions == 0 {
			b.topicLocked(tn, true)
			return nil
		}
		if tn.partition >= 0 {
			return fmt.Errorf("%w: %q names a partition", ErrInvalidTopic, topic)
		}
		b.partitioned[tn.full] = partitions
		for i := range partitions {
			pn, _ := parseTopic(fmt.Sprintf("%s%s%d", tn.full, partitionSuffix, i))
			b.topicLocked(pn, true)
		}
		return nil
	})
}

// change runs f, an operator's change to topic, with the broker's lock held
// and topic parsed: it returns the parse's error, or ErrClosed once the
// broker is closed, without running f.
func (b *Broker) change(topic string, f func(tn topicName) error) error {
	tn, err := parseTopic(topic)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shut() {
		return ErrClosed
	}
	return f(tn)
}

// UpdatePartitions grows the partitioned topic to partitions, as Pulsar's
// update-partitioned-topic does: the new partitions are created empty,
// each with the durable subscriptions the topic's partitions have (their
// type kept, their cursors at the start), so that every message published
// to a new partition is kept for those subscriptions, whether or not their
// consumers have found the partition yet. Clients find new partitions by
// asking for the topic's partition count again (pulsar-client-go's
// consumers every ConsumerOptions.AutoDiscoveryPeriod). Publish spreads
// messages over every partition from then on. Giving the current count is
// a no-op. It returns an error wrapping ErrNotPartitioned for a topic that
// is not partitioned, ErrPartitionsShrink for fewer partitions than the
// topic has, an error for a name it cannot parse, or ErrClosed.
func (b *Broker) UpdatePartitions(topic string, partitions int) error {
	return b.change(topic, func(tn topicName) error {
		cur := b.partitioned[tn.full]
		switch {
		case cur == 0:
			return fmt.Errorf("%w: %s", ErrNotPartitioned, tn.full)
		case partitions < cur:
			return fmt.Errorf("%w: %s has %d partitions, asked for %d", ErrPartitionsShrink, tn.full, cur, partitions)
		}
		subs := map[string]int{} // durable subscription → type
		for i := range cur {
			t := b.topics[fmt.Sprintf("%s%s%d", tn.full, partitionSuffix, i)]
			if t == nil {
				continue
			}
			for name, s := range t.subs {
				if s.durable {
					subs[name] = s.typ
				}
			}
		}
		for i := cur; i < partitions; i++ {
			pn, _ := parseTopic(fmt.Sprintf("%s%s%d", tn.full, partitionSuffix, i))
			t := b.topicLocked(pn, true)
			for name, typ := range subs {
				if t.subs[name] == nil {
					t.subs[name] = newSubscription(t, name, typ, true)
				}
			}
		}
		b.partitioned[tn.full] = partitions
		return nil
	})
}

// Publish stores msgs on topic, one unbatched entry each, and returns their
// ids. On a partitioned topic a message with a key goes to the partition
// its key hashes to, others round-robin.
func (b *Broker) Publish(ctx context.Context, topic string, msgs ...Message) ([]MessageID, error) {
	return b.publish(ctx, topic, false, msgs)
}

// PublishBatch stores msgs on topic as one batched entry, exactly as a
// batching producer would, and returns their ids (same entry, batch
// indexes 0..n-1). On a partitioned topic the batch goes to the partition
// of the first message's key, or round-robin.
func (b *Broker) PublishBatch(ctx context.Context, topic string, msgs ...Message) ([]MessageID, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	return b.publish(ctx, topic, true, msgs)
}

func (b *Broker) publish(ctx context.Context, name string, batch bool, msgs []Message) ([]MessageID, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tn, err := parseTopic(name)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shut() {
		return nil, ErrClosed
	}
	target := func(m Message) *topic {
		n := b.partitioned[tn.full]
		if n == 0 {
			return b.topicLocked(tn, true)
		}
		var p int
		if m.Key != "" {
			p = int(murmur3([]byte(m.Key)) % uint32(n))
		} else {
			b.nextProdNum++
			p = int(b.nextProdNum % uint64(n))
		}
		pn, _ := parseTopic(fmt.Sprintf("%s%s%d", tn.full, partitionSuffix, p))
		return b.topicLocked(pn, true)
	}
	now := time.Now()
	ids := make([]MessageID, 0, len(msgs))
	if batch {
		t := target(msgs[0])
		data := encodeBatch(msgs, uint64(len(t.entries)), now)
		m, _ := decodeMetadata(mustMeta(data), false)
		e := b.appendLocked(t, data, m)
		b.enforceQuotasLocked(t)
		for i := range msgs {
			ids = append(ids, MessageID{LedgerID: t.ledger, EntryID: e, Partition: t.name.partition, BatchIndex: int32(i)})
		}
		return ids, nil
	}
	for _, msg := range msgs {
		t := target(msg)
		data := encodeSingle(msg, uint64(len(t.entries)), now)
		m, _ := decodeMetadata(mustMeta(data), false)
		e := b.appendLocked(t, data, m)
		b.enforceQuotasLocked(t)
		ids = append(ids, MessageID{LedgerID: t.ledger, EntryID: e, Partition: t.name.partition, BatchIndex: -1})
	}
	return ids, nil
}

func mustMeta(data []byte) []byte {
	meta, _, _ := splitPayloadSection(data)
	return meta
}

func appendProps(b []byte, num protowire.Number, props map[string]string) []byte {
	for _, k := range slices.Sorted(maps.Keys(props)) {
		start := len(b)
		b = appendStringField(b, 1, k)
		b = appendStringField(b, 2, props[k])
		b = endNested(b, num, start)
	}
	return b
}

func millis(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixMilli())
}

func appendMetaHead(b []byte, m Message, seq uint64, now time.Time) []byte {
	name := m.ProducerName
	if name == "" {
		name = "pulsartest"
	}
	pub := m.PublishTime
	if pub.IsZero() {
		pub = now
	}
	b = appendStringField(b, 1, name)
	b = appendVarintField(b, 2, seq)
	b = appendVarintField(b, 3, millis(pub))
	return b
}

func encodeSingle(m Message, seq uint64, now time.Time) []byte {
	meta := appendMetaHead(nil, m, seq, now)
	meta = appendProps(meta, 4, m.Properties)
	if m.Key != "" {
		meta = appendStringField(meta, 6, m.Key)
	}
	if !m.EventTime.IsZero() {
		meta = appendVarintField(meta, 12, millis(m.EventTime))
	}
	if m.OrderingKey != "" {
		meta = appendBytesField(meta, 18, []byte(m.OrderingKey))
	}
	if !m.DeliverAt.IsZero() {
		meta = appendVarintField(meta, 19, millis(m.DeliverAt))
	}
	return buildPayloadSection(meta, m.Payload)
}

func encodeBatch(msgs []Message, seq uint64, now time.Time) []byte {
	meta := appendMetaHead(nil, msgs[0], seq, now)
	if msgs[0].Key != "" {
		meta = appendStringField(meta, 6, msgs[0].Key)
	}
	meta = appendVarintField(meta, 11, uint64(len(msgs)))
	if msgs[0].OrderingKey != "" {
		meta = appendBytesField(meta, 18, []byte(msgs[0].OrderingKey))
	}
	if !msgs[0].DeliverAt.IsZero() {
		meta = appendVarintField(meta, 19, millis(msgs[0].DeliverAt))
	}
	var payload []byte
	var smm []byte
	for i, m := range msgs {
		smm = appendProps(smm[:0], 1, m.Properties)
		if m.Key != "" {
			smm = appendStringField(smm, 2, m.Key)
		}
		smm = appendVarintField(smm, 3, uint64(len(m.Payload)))
		if !m.EventTime.IsZero() {
			smm = appendVarintField(smm, 5, millis(m.EventTime))
		}
		if m.OrderingKey != "" {
			smm = appendBytesField(smm, 7, []byte(m.OrderingKey))
		}
		smm = appendVarintField(smm, 8, seq+uint64(i))
		payload = binary.BigEndian.AppendUint32(payload, uint32(len(smm)))
		payload = append(payload, smm...)
		payload = append(payload, m.Payload...)
	}
	return buildPayloadSection(meta, payload)
}

// Messages returns every message stored on topic name in order: for a
// partitioned topic, partition 0's messages, then partition 1's, and so
// on. Batched entries are split into their messages; LZ4 and ZLIB entries
// are decompressed (ZSTD and SNAPPY entries are returned as one Message
// carrying the compressed bytes as its Payload). An unknown topic yields nil.
func (b *Broker) Messages(name string) []Message {
	tn, err := parseTopic(name)
	if err != nil {
		return nil
	}
	b.mu.Lock()
	var ts []*topic
	if n := b.partitioned[tn.full]; n > 0 {
		for i := range n {
			pn, _ := parseTopic(fmt.Sprintf("%s%s%d", tn.full, partitionSuffix, i))
			if t := b.topics[pn.full]; t != nil {
				ts = append(ts, t)
			}
		}
	} else if t := b.topics[tn.full]; t != nil {
		ts = append(ts, t)
	}
	type snap struct {
		ledger  uint64
		part    int32
		entries []*entry
	}
	snaps := make([]snap, len(ts))
	for i, t := range ts {
		snaps[i] = snap{t.ledger, t.name.partition, slices.Clone(t.entries)}
	}
	b.mu.Unlock()
	var out []Message
	for _, s := range snaps {
		for id, e := range s.entries {
			out = appendDecoded(out, e, MessageID{LedgerID: s.ledger, EntryID: uint64(id), Partition: s.part, BatchIndex: -1})
		}
	}
	return out
}

func appendDecoded(out []Message, e *entry, id MessageID) []Message {
	metaB, payload, err := splitPayloadSection(e.data)
	if err != nil {
		return out
	}
	m, err := decodeMetadata(metaB, true)
	if err != nil {
		return out
	}
	base := Message{
		ProducerName: m.producerName,
		PublishTime:  time.UnixMilli(int64(m.publishTime)),
		ID:           id,
	}
	if m.deliverAt > 0 {
		base.DeliverAt = time.UnixMilli(m.deliverAt)
	}
	if m.compression != compressNone {
		if plain, err := decompress(m.compression, payload, m.uncompressed); err == nil {
			payload = plain
			m.compression = compressNone
		}
	}
	if !m.batched || m.compression != compressNone {
		msg := base
		msg.Key = m.partitionKey
		msg.OrderingKey = string(m.orderingKey)
		msg.Payload = payload
		msg.Properties = m.properties
		if m.eventTime > 0 {
			msg.EventTime = time.UnixMilli(int64(m.eventTime))
		}
		return append(out, msg)
	}
	for i := int32(0); i < m.numMessages; i++ {
		if len(payload) < 4 {
			return out
		}
		n := int(binary.BigEndian.Uint32(payload))
		if n > len(payload)-4 {
			return out
		}
		sm, err := decodeSingleMeta(payload[4 : 4+n])
		if err != nil || sm.payloadSize < 0 || sm.payloadSize > len(payload)-4-n {
			return out
		}
		msg := base
		msg.ID.BatchIndex = i
		msg.Key = sm.partitionKey
		msg.OrderingKey = string(sm.orderingKey)
		msg.Properties = sm.properties
		msg.Payload = payload[4+n : 4+n+sm.payloadSize]
		if sm.eventTime > 0 {
			msg.EventTime = time.UnixMilli(int64(sm.eventTime))
		}
		out = append(out, msg)
		payload = payload[4+n+sm.payloadSize:]
	}
	return out
}

// Consumers returns the stats of every consumer that ever subscribed to
// subscription on topic, in subscribe order; consumers that left have
// Connected false. A client that reconnects appears again as a new entry.
// Pass a partition's own name (PartitionTopic) for one partition; the base
// name of a partitioned topic returns partition 0's consumers, then
// partition 1's, and so on (each entry's Topic names its partition).
func (b *Broker) Consumers(topic, subscription string) []ConsumerStats {
	tn, err := parseTopic(topic)
	if err != nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.partitioned[tn.full]; n > 0 {
		var out []ConsumerStats
		for i := range n {
			pn, _ := parseTopic(fmt.Sprintf("%s%s%d", tn.full, partitionSuffix, i))
			out = b.consumerStatsLocked(out, pn, subscription)
		}
		return out
	}
	return b.consumerStatsLocked(nil, tn, subscription)
}

func (b *Broker) consumerStatsLocked(out []ConsumerStats, tn topicName, subscription string) []ConsumerStats {
	t := b.topics[tn.full]
	if t == nil {
		return out
	}
	s := t.subs[subscription]
	if s == nil {
		return out
	}
	for _, c := range s.history {
		st := c.st
		st.Flows = slices.Clone(c.st.Flows)
		st.Available = c.permits
		switch s.typ {
		case subExclusive, subFailover:
			st.Active = st.Connected && s.active == c
		default:
			st.Active = st.Connected
		}
		out = append(out, st)
	}
	return out
}

// Subscriptions returns the names of the subscriptions on topic, sorted:
// what a test needs to refer to one whose name its subscriber chose at
// random. For the base name of a partitioned topic it returns those of
// every partition, each once. A subscription lives as long as on a real
// broker: a durable one until deleted, a non-durable one until its last
// consumer leaves.
func (b *Broker) Subscriptions(topic string) []string {
	tn, err := parseTopic(topic)
	if err != nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	names := b.namesLocked(tn)
	var out []string
	for _, name := range names {
		if t := b.topics[name]; t != nil {
			out = append(out, slices.Collect(maps.Keys(t.subs))...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// namesLocked returns the names of the topics tn stands for: its
// partitions' for the base name of a partitioned topic, else its own.
func (b *Broker) namesLocked(tn topicName) []string {
	n := b.partitioned[tn.full]
	if n == 0 {
		return []string{tn.full}
	}
	names := make([]string, 0, n)
	for i := range n {
		names = append(names, fmt.Sprintf("%s%s%d", tn.full, partitionSuffix, i))
	}
	return names
}

// Backlog returns how many messages of subscription on topic are not yet
// acknowledged, or -1 if there is no such subscription. For the base name
// of a partitioned topic it sums the partitions that have the subscription.
func (b *Broker) Backlog(topic, subscription string) int64 {
	tn, err := parseTopic(topic)
	if err != nil {
		return -1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.partitioned[tn.full]; n > 0 {
		total := int64(-1)
		for i := range n {
			pn, _ := parseTopic(fmt.Sprintf("%s%s%d", tn.full, partitionSuffix, i))
			if v := b.backlogLocked(pn, subscription); v >= 0 {
				total = max(total, 0) + v
			}
		}
		return total
	}
	return b.backlogLocked(tn, subscription)
}

func (b *Broker) backlogLocked(tn topicName, subscription string) int64 {
	t := b.topics[tn.full]
	if t == nil || t.subs[subscription] == nil {
		return -1
	}
	s := t.subs[subscription]
	var n int64
	for id := s.markDelete; id < uint64(len(t.entries)); id++ {
		if s.full[id] {
			continue
		}
		n += s.live(id)
	}
	return n
}

// DropConnections closes every client connection abruptly, as a crashing
// broker would. Consumers are detached at once and their unacknowledged
// messages become available for redelivery; clients reconnect on their own.
func (b *Broker) DropConnections() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.conns {
		c.close()
		b.removeConnLocked(c)
	}
}

// RefuseSubscribe makes every following SUBSCRIBE to subscription on topic
// fail with a protocol error until called again with a nil err. A
// *ServerError chooses the code the client sees; any other error is sent as
// ServiceNotReady with its text. For a partitioned topic, the base name
// refuses every partition. On a Broker Start did not make it does
// nothing.
func (b *Broker) RefuseSubscribe(topic, subscription string, err error) {
	tn, perr := parseTopic(topic)
	if perr != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done == nil {
		return
	}
	k := subKey{tn.full, subscription}
	if err == nil {
		delete(b.refused, k)
		return
	}
	b.refused[k] = err
}

// Command is a type of command a client sends, as Withhold takes it.
type Command int

// Commands of pulsar-client-go's that wait for the broker's answer up to
// the client's operation timeout: a lookup, its partitioned-topic lookup,
// creating a producer, subscribing, and closing a producer or a consumer;
// and a message sent (CommandSend), whose receipt a send waits for up to
// its context's end or the producer's send timeout.
const (
	CommandLookup              Command = cmdLookup
	CommandPartitionedMetadata Command = cmdPartitionedMeta
	CommandProducer            Command = cmdProducer
	CommandSubscribe           Command = cmdSubscribe
	CommandCloseProducer       Command = cmdCloseProducer
	CommandCloseConsumer       Command = cmdCloseConsumer
	CommandSend                Command = cmdSend
)

// CommandAck is an acknowledgement a consumer sends, which
// pulsar-client-go does not wait on (unless its consumer asks for ack
// receipts): withheld, the broker records none of the connection's acks
// until they are released, and a dropped connection loses them.
const CommandAck Command = cmdAck

// CommandFlow (a consumer's permits) and CommandRedeliver (its
// REDELIVER_UNACKNOWLEDGED_MESSAGES, as a negative acknowledgement sends)
// are commands pulsar-client-go sends without waiting for an answer:
// withheld, the connection is read no further, so the consumer gets no
// more messages and its later commands, a close included, wait too.
const (
	CommandFlow      Command = cmdFlow
	CommandRedeliver Command = cmdRedeliver
)

// String returns the command's name in the protocol ("SUBSCRIBE").
func (c Command) String() string { return cmdName(int(c)) }

// Withhold makes the broker stop answering cmds, as a broker that hangs
// does, until release is called: a connection that sends one of them is
// not read past it, so that command and every later one of the connection
// (pings included) wait unanswered; other connections go on until they
// send one. Stats().Withheld counts the commands waiting. release lets
// them through, each connection's in the order it sent them, and stops
// withholding cmds; it is idempotent. Close and DropConnections close the
// waiting connections, their commands unanswered. A Broker Start did not
// make withholds nothing: its release does nothing.
func (b *Broker) Withhold(cmds ...Command) (release func()) {
	ch := make(chan struct{})
	b.mu.Lock()
	if b.done == nil {
		b.mu.Unlock()
		return func() {}
	}
	for _, c := range cmds {
		if b.withheld[int(c)] == nil {
			b.withholding.Add(1)
		}
		b.withheld[int(c)] = ch
	}
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			for _, c := range cmds {
				if b.withheld[int(c)] == ch {
					delete(b.withheld, int(c))
					b.withholding.Add(-1)
				}
			}
			b.mu.Unlock()
			close(ch)
		})
	}
}

// StallDispatch stops (stalled true) or resumes pushing messages on topic
// (for a partitioned topic, on all its partitions). While stalled, FLOW
// permits are still counted and acks processed; on resume the broker
// dispatches what the permits allow. On a Broker Start did not make it
// does nothing.
func (b *Broker) StallDispatch(topic string, stalled bool) {
	tn, err := parseTopic(topic)
	if err != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done == nil {
		return
	}
	if stalled {
		b.stalled[tn.full] = true
	} else {
		delete(b.stalled, tn.full)
	}
	for _, t := range b.topics {
		if t.name.full != tn.full && t.name.base != tn.full {
			continue
		}
		t.stalled = stalled
		if !stalled {
			for _, s := range t.subs {
				s.dispatch()
			}
		}
	}
}

// Unload does what a real broker does when it unloads topic (an operator's
// "pulsar-admin topics unload", or a bundle moving to another broker): it
// sends CLOSE_CONSUMER to every consumer and CLOSE_PRODUCER to every
// producer of the topic (for a partitioned topic, of each partition). The
// consumers' unacknowledged messages go back for redelivery without raising
// their redelivery counts; subscriptions keep their cursors. Clients look
// the topic up again and reconnect. It returns an error for a name it
// cannot parse, or ErrClosed.
func (b *Broker) Unload(topic string) error {
	return b.change(topic, func(tn topicName) error {
		names := b.namesLocked(tn)
		for _, name := range names {
			t := b.topics[name]
			if t == nil {
				continue
			}
			for _, s := range t.subs {
				b.closeConsumersLocked(s)
			}
			b.closeProducersLocked(t)
		}
		return nil
	})
}

// closeConsumersLocked detaches s's consumers and sends each
// CLOSE_CONSUMER.
func (b *Broker) closeConsumersLocked(s *subscription) {
	for _, c := range slices.Clone(s.consumers) {
		b.removeConsumerLocked(c)
		c.conn.sendClose(cmdCloseConsumer, c.id)
	}
}

// closeProducersLocked forgets t's producers and sends each
// CLOSE_PRODUCER.
func (b *Broker) closeProducersLocked(t *topic) {
	for c := range b.conns {
		for pid, p := range c.producers {
			if p.topic != t {
				continue
			}
			t.producers--
			delete(c.producers, pid)
			c.sendClose(cmdCloseProducer, pid)
		}
	}
}

// DeleteSubscription deletes subscription sub of topic (for a
// partitioned topic, of each partition that has it), as a real broker
// does for an operator's "pulsar-admin topics unsubscribe" (REST DELETE
// /admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription/{sub}).
// Without force it returns an error wrapping ErrSubscriptionBusy while
// consumers are connected to it, and deletes nothing. With force it first
// sends CLOSE_CONSUMER to each of them, as "--force" does. The cursor goes
// with the subscription: its position, its unacknowledged and redelivery
// state. A consumer that subscribes again, the client reconnecting one it
// was told to close included, creates the subscription anew at its initial
// position (latest: what was published meanwhile is skipped; earliest:
// every message the topic keeps is delivered again). It returns an error
// wrapping ErrSubscriptionNotFound when the topic (for a partitioned
// topic, every partition) has no such subscription, an error for a name
// it cannot parse, or ErrClosed.
func (b *Broker) DeleteSubscription(topic, sub string, force bool) error {
	return b.change(topic, func(tn topicName) error {
		var subs []*subscription
		for _, name := range b.namesLocked(tn) {
			if t := b.topics[name]; t != nil && t.subs[sub] != nil {
				subs = append(subs, t.subs[sub])
			}
		}
		if len(subs) == 0 {
			return fmt.Errorf("%w: %q on %s", ErrSubscriptionNotFound, sub, tn.full)
		}
		if !force {
			for _, s := range subs {
				if len(s.consumers) > 0 {
					return fmt.Errorf("%w: %q on %s", ErrSubscriptionBusy, sub, tn.full)
				}
			}
		}
		for _, s := range subs {
			b.deleteSubscriptionLocked(s)
		}
		return nil
	})
}

// deleteSubscriptionLocked closes s's consumers from the broker's side and
// forgets s.
func (b *Broker) deleteSubscriptionLocked(s *subscription) {
	s.durable = false
	b.closeConsumersLocked(s)
	s.dropDelayed()
	if s.t.subs[s.name] == s {
		delete(s.t.subs, s.name)
	}
}

// DeleteTopic deletes the topic name (for a partitioned topic, each
// partition, and the topic's partitioned metadata), as a real broker does for an
// operator's "pulsar-admin topics delete" (REST DELETE
// /admin/v2/persistent/{tenant}/{namespace}/{topic}). Without force it
// returns an error wrapping ErrTopicBusy while producers or consumers are
// connected to it, and deletes nothing. With force it first sends
// CLOSE_PRODUCER to each producer and CLOSE_CONSUMER to each consumer, as
// "--force" does. Its messages and its subscriptions, cursors included,
// go with it. As topic auto-creation is on, a client that reconnects
// creates it again, empty and non-partitioned, and its consumers create
// their subscriptions anew at their initial positions; the new topic's
// message ids are from a new ledger, so an acknowledgement of a message of
// the deleted topic acknowledges nothing. It returns an error wrapping
// ErrTopicNotFound for a topic the broker does not have, an error for a
// name it cannot parse, or ErrClosed.
func (b *Broker) DeleteTopic(name string, force bool) error {
	return b.change(name, func(tn topicName) error {
		var ts []*topic
		for _, n := range b.namesLocked(tn) {
			if t := b.topics[n]; t != nil {
				ts = append(ts, t)
			}
		}
		if len(ts) == 0 && b.partitioned[tn.full] == 0 {
			return fmt.Errorf("%w: %s", ErrTopicNotFound, tn.full)
		}
		if !force {
			for _, t := range ts {
				busy := t.producers > 0
				for _, s := range t.subs {
					busy = busy || len(s.consumers) > 0
				}
				if busy {
					return fmt.Errorf("%w: %s", ErrTopicBusy, tn.full)
				}
			}
		}
		for _, t := range ts {
			b.closeProducersLocked(t)
			for _, s := range t.subs {
				b.deleteSubscriptionLocked(s)
			}
			delete(b.topics, t.name.full)
		}
		delete(b.partitioned, tn.full)
		return nil
	})
}
