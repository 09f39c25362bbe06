package pulsartest

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

func (b *Broker) handleProducer(c *conn, body []byte) bool {
	f, err := decodeFlat(body)
	if err != nil {
		return false
	}
	prodID, reqID := f.u[2], f.u[3]
	tn, err := parseTopic(f.str(1))
	if err != nil {
		c.sendError(reqID, InvalidTopicName, err.Error())
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.removed {
		return false // the connection was dropped while this frame was queued
	}
	if n := b.partitioned[tn.full]; n > 0 {
		c.sendError(reqID, NotAllowedError, fmt.Sprintf("pulsartest: %s is partitioned (%d partitions); produce to its partitions", tn.full, n))
		return true
	}
	if p, ok := c.producers[prodID]; ok {
		// A retried CREATE for a producer already registered on this
		// connection: answer it again.
		name := p.name
		c.write(func(o []byte) []byte { return appendProducerSuccess(o, reqID, name) })
		return true
	}
	if code, msg, refused := b.refuseProducerLocked(tn); refused {
		c.sendError(reqID, code, msg)
		return true
	}
	name := f.str(4)
	if name == "" {
		b.nextProdNum++
		name = fmt.Sprintf("pulsartest-%d-%d", c.id, b.nextProdNum)
	}
	t := b.topicLocked(tn, true)
	if initial := f.str(13); initial != "" && t.subs[initial] == nil {
		// initial_subscription_name (pulsar-client-go's DLQ producer sets
		// it from DLQPolicy.InitialSubscriptionName): create the durable
		// subscription at the earliest position, as Pulsar does.
		t.subs[initial] = newSubscription(t, initial, subShared, true)
	}
	t.producers++
	c.producers[prodID] = &producer{id: prodID, name: name, topic: t}
	c.write(func(o []byte) []byte { return appendProducerSuccess(o, reqID, name) })
	return true
}

func appendProducerSuccess(o []byte, reqID uint64, name string) []byte {
	o, fs, bs := beginFrame(o, cmdProducerSuccess)
	o = appendVarintField(o, 1, reqID)
	o = appendStringField(o, 2, name)
	o = appendVarintField(o, 3, math.MaxUint64) // last_sequence_id = -1
	o = appendBoolField(o, 6, true)
	return endFrame(o, cmdProducerSuccess, fs, bs, nil)
}

func (b *Broker) handleSend(c *conn, body []byte, payload []byte) bool {
	// The hot path: decode the three fields used without building a map.
	var prodID, seq, highest uint64
	err := walk(body, func(num protowire.Number, _ protowire.Type, v uint64, _ []byte) error {
		switch num {
		case 1:
			prodID = v
		case 2:
			seq = v
		case 6:
			highest = v
		}
		return nil
	})
	if err != nil {
		return false
	}
	sendErr := func(code ServerErrorCode, msg string) {
		c.write(func(o []byte) []byte {
			o, fs, bs := beginFrame(o, cmdSendError)
			o = appendVarintField(o, 1, prodID)
			o = appendVarintField(o, 2, seq)
			o = appendVarintField(o, 3, uint64(code))
			o = appendStringField(o, 4, msg)
			return endFrame(o, cmdSendError, fs, bs, nil)
		})
	}
	meta, content, err := splitPayloadSection(payload)
	if err != nil {
		b.log.Warn("pulsartest: rejected SEND", "conn", c.id, "error", err)
		sendErr(ChecksumError, err.Error())
		return true
	}
	m, err := decodeMetadata(meta, false)
	if err != nil {
		sendErr(UnknownError, err.Error())
		return true
	}
	if err := checkBatchSize(m, len(content)); err != nil {
		// Refused for good: a pulsar-client-go producer fails the message
		// instead of reconnecting to send it again.
		b.log.Warn("pulsartest: rejected SEND", "conn", c.id, "error", err)
		sendErr(NotAllowedError, err.Error())
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.removed {
		return false
	}
	p, ok := c.producers[prodID]
	if !ok {
		sendErr(UnknownError, fmt.Sprintf("pulsartest: unknown producer %d", prodID))
		return true
	}
	t := p.topic
	id := b.appendLocked(t, payload, m)
	ledger, part := t.ledger, t.name.partition
	c.write(func(o []byte) []byte {
		o, fs, bs := beginFrame(o, cmdSendReceipt)
		o = appendVarintField(o, 1, prodID)
		o = appendVarintField(o, 2, seq)
		o = appendMsgID(o, 3, msgID{ledger: ledger, entry: id, partition: part, batchIndex: -1})
		if highest > 0 {
			o = appendVarintField(o, 4, highest)
		}
		return endFrame(o, cmdSendReceipt, fs, bs, nil)
	})
	b.enforceQuotasLocked(t)
	return true
}

func (b *Broker) handleCloseProducer(c *conn, body []byte) bool {
	f, err := decodeFlat(body)
	if err != nil {
		return false
	}
	b.mu.Lock()
	if p, ok := c.producers[f.u[1]]; ok {
		p.topic.producers--
		delete(c.producers, f.u[1])
	}
	b.mu.Unlock()
	c.sendSuccess(f.u[2])
	return true
}

// subscribeCmd is the part of CommandSubscribe the broker uses.
type subscribeCmd struct {
	topic, sub, name string
	typ              int
	consumerID       uint64
	reqID            uint64
	priority         int32
	durable          bool
	earliest         bool
	start            *msgID
	ranges           [][2]int32
}

func decodeSubscribe(body []byte) (subscribeCmd, error) {
	s := subscribeCmd{durable: true}
	err := walk(body, func(num protowire.Number, _ protowire.Type, v uint64, bs []byte) error {
		switch num {
		case 1:
			s.topic = string(bs)
		case 2:
			s.sub = string(bs)
		case 3:
			s.typ = int(v)
		case 4:
			s.consumerID = v
		case 5:
			s.reqID = v
		case 6:
			s.name = string(bs)
		case 7:
			s.priority = int32(v)
		case 8:
			s.durable = v != 0
		case 9:
			id, err := decodeMsgID(bs)
			if err != nil {
				return err
			}
			s.start = &id
		case 13:
			s.earliest = v == 1
		case 17:
			return walk(bs, func(num protowire.Number, _ protowire.Type, _ uint64, r []byte) error {
				if num != 3 {
					return nil
				}
				var rg [2]int32
				err := walk(r, func(num protowire.Number, _ protowire.Type, v uint64, _ []byte) error {
					if num == 1 || num == 2 {
						rg[num-1] = int32(v)
					}
					return nil
				})
				s.ranges = append(s.ranges, rg)
				return err
			})
		}
		return nil
	})
	return s, err
}

func (b *Broker) handleSubscribe(c *conn, body []byte) bool {
	cmd, err := decodeSubscribe(body)
	if err != nil {
		return false
	}
	tn, err := parseTopic(cmd.topic)
	if err != nil {
		c.sendError(cmd.reqID, InvalidTopicName, err.Error())
		return true
	}
	if cmd.typ < subExclusive || cmd.typ > subKeyShared {
		c.sendError(cmd.reqID, NotAllowedError, fmt.Sprintf("pulsartest: unknown subscription type %d", cmd.typ))
		return true
	}
	sticky := cmd.typ == subKeyShared && len(cmd.ranges) > 0
	if sticky {
		var ok bool
		if cmd.ranges, ok = normalizeRanges(cmd.ranges); !ok {
			// As a real broker refuses it.
			c.sendError(cmd.reqID, ConsumerAssignError, rangeOrderMsg)
			return true
		}
	} else {
		cmd.ranges = nil
	}
	if cmd.sub == "" {
		c.sendError(cmd.reqID, NotAllowedError, "pulsartest: empty subscription name")
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.removed {
		return false // the connection was dropped while this frame was queued
	}
	refusal := b.refused[subKey{tn.full, cmd.sub}]
	if refusal == nil && tn.partition >= 0 {
		refusal = b.refused[subKey{tn.base, cmd.sub}]
	}
	if err := refusal; err != nil {
		b.stats.SubscribesRefused++
		code, msg := asServerError(err)
		c.sendError(cmd.reqID, code, msg)
		return true
	}
	if n := b.partitioned[tn.full]; n > 0 {
		c.sendError(cmd.reqID, NotAllowedError, fmt.Sprintf("pulsartest: %s is partitioned (%d partitions); subscribe to its partitions", tn.full, n))
		return true
	}
	if old, ok := c.consumers[cmd.consumerID]; ok {
		if old.sub.name == cmd.sub && old.sub.t.name.full == tn.full {
			c.sendSuccess(cmd.reqID) // a retried SUBSCRIBE
			return true
		}
		c.sendError(cmd.reqID, ConsumerBusy, fmt.Sprintf("pulsartest: consumer id %d already in use on this connection", cmd.consumerID))
		return true
	}
	t := b.topicLocked(tn, true)
	s := t.subs[cmd.sub]
	if s != nil && len(s.consumers) > 0 {
		if s.typ != cmd.typ {
			c.sendError(cmd.reqID, ConsumerBusy, fmt.Sprintf("pulsartest: subscription %q is %s, not %s", cmd.sub, subTypeNames[s.typ], subTypeNames[cmd.typ]))
			return true
		}
		if s.typ == subExclusive {
			c.sendError(cmd.reqID, ConsumerBusy, fmt.Sprintf("pulsartest: exclusive consumer is already connected to subscription %q", cmd.sub))
			return true
		}
	}
	if s != nil && cmd.typ == subKeyShared {
		if other := rangeConflict(s, cmd.ranges); other != nil {
			// As a real broker does (HashRangeExclusiveStickyKeyConsumerSelector).
			c.sendError(cmd.reqID, ConsumerAssignError, fmt.Sprintf("Range conflict with consumer %q", other.name))
			return true
		}
	}
	if s == nil {
		s = newSubscription(t, cmd.sub, cmd.typ, cmd.durable)
		s.readPos = startPosition(t, cmd)
		if t.nonPersistent() {
			// A non-persistent topic keeps no messages for a subscription
			// that did not exist when they were published.
			s.readPos = uint64(len(t.entries))
		}
		s.markDelete = s.readPos
		t.subs[cmd.sub] = s
	}
	if s.typ != cmd.typ {
		s.retype(cmd.typ)
	}
	cons := &consumer{conn: c, id: cmd.consumerID, name: cmd.name, sub: s, priority: cmd.priority, ranges: cmd.ranges, sticky: sticky, notified: -1}
	cons.st = ConsumerStats{
		ConsumerID: cmd.consumerID, Name: cmd.name, Topic: tn.full, Subscription: cmd.sub,
		SubType: subTypeNames[cmd.typ], Connected: true,
	}
	s.consumers = append(s.consumers, cons)
	s.history = append(s.history, cons)
	s.rebuildRing()
	c.consumers[cmd.consumerID] = cons
	// A real broker adds the consumer, elects the active one and sends the
	// notices (AbstractDispatcherSingleActiveConsumer.addConsumer) before
	// it answers the subscribe.
	s.updateActive()
	c.sendSuccess(cmd.reqID)
	s.dispatch()
	b.log.Debug("pulsartest subscribed", "conn", c.id, "topic", tn.full, "subscription", cmd.sub, "type", subTypeNames[cmd.typ], "consumer", cmd.consumerID)
	return true
}

// startPosition is where a new subscription's cursor starts: the start
// message id of a non-durable (reader) subscription, else the initial
// position (earliest = first entry, latest = after the last).
func startPosition(t *topic, cmd subscribeCmd) uint64 {
	end := uint64(len(t.entries))
	if cmd.start == nil || cmd.durable {
		if cmd.earliest {
			return 0
		}
		return end
	}
	id := cmd.start
	switch {
	case int64(id.ledger) < 0 || id.ledger < t.ledger:
		return 0
	case id.ledger > t.ledger || int64(id.entry) < 0 && id.ledger == math.MaxInt64:
		return end
	case int64(id.entry) < 0:
		return 0
	default:
		return min(id.entry, end)
	}
}

func (b *Broker) consumerLocked(c *conn, id uint64) *consumer {
	return c.consumers[id]
}

// addSaturating returns v + n, or math.MaxInt64 if that is more.
func addSaturating(v int64, n uint32) int64 {
	if v > math.MaxInt64-int64(n) {
		return math.MaxInt64
	}
	return v + int64(n)
}

func (b *Broker) handleFlow(c *conn, body []byte) bool {
	var consumerID uint64
	var permits uint32
	err := walk(body, func(num protowire.Number, _ protowire.Type, v uint64, _ []byte) error {
		switch num {
		case 1:
			consumerID = v
		case 2:
			permits = uint32(v)
		}
		return nil
	})
	if err != nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cons := b.consumerLocked(c, consumerID)
	if cons == nil {
		return true
	}
	if len(cons.st.Flows) < MaxFlowsRecorded {
		cons.st.Flows = append(cons.st.Flows, permits)
	} else {
		cons.st.FlowsOmitted++
	}
	cons.st.PermitsGranted = addSaturating(cons.st.PermitsGranted, permits)
	cons.permits = addSaturating(cons.permits, permits)
	cons.st.MaxAvailable = max(cons.st.MaxAvailable, cons.permits)
	cons.sub.dispatch()
	return true
}

// handleAck applies an ACK. The frame is read twice: once to check it
// whole (a malformed one changes nothing and closes the connection), then,
// under the lock, applying each message id as it is decoded, so that
// nothing is collected per id however many the frame holds.
func (b *Broker) handleAck(c *conn, body []byte) bool {
	var (
		consumerID, reqID uint64
		cumulative        bool
		hasReq            bool
	)
	err := walk(body, func(num protowire.Number, _ protowire.Type, v uint64, bs []byte) error {
		switch num {
		case 1:
			consumerID = v
		case 2:
			cumulative = v == 1
		case 3:
			_, err := decodeMsgID(bs)
			return err
		case 8:
			reqID, hasReq = v, true
		}
		return nil
	})
	if err != nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cons := b.consumerLocked(c, consumerID)
	if cons != nil {
		_ = walk(body, func(num protowire.Number, _ protowire.Type, _ uint64, bs []byte) error {
			if num == 3 {
				id, _ := decodeMsgID(bs) // checked above
				b.ackLocked(cons, cumulative, id)
			}
			return nil
		})
		cons.sub.dispatch()
	}
	if hasReq {
		c.write(func(o []byte) []byte {
			o, fs, bs := beginFrame(o, cmdAckResponse)
			o = appendVarintField(o, 1, consumerID)
			if cons == nil {
				o = appendVarintField(o, 4, uint64(ConsumerNotFound))
				o = appendStringField(o, 5, "pulsartest: unknown consumer")
			}
			o = appendVarintField(o, 6, reqID)
			return endFrame(o, cmdAckResponse, fs, bs, nil)
		})
	}
	return true
}

// ackLocked applies one message id of an ACK from cons.
func (b *Broker) ackLocked(cons *consumer, cumulative bool, id msgID) {
	s := cons.sub
	if id.ledger != s.t.ledger {
		return
	}
	partialIgnored := id.ackSet.words > 0 && !b.opts.BatchIndexAck
	if cumulative && !s.singleActive() {
		// A real broker ignores a cumulative ack on Shared and Key_Shared
		// subscriptions (Consumer.messageAcked: "Received cumulative ack on
		// shared subscription, ignoring").
		return
	}
	if cumulative {
		last := min(id.entry, uint64(len(s.t.entries)))
		for e := s.markDelete; e < last; e++ {
			s.ack(cons, e, ackSet{})
		}
		if id.entry < uint64(len(s.t.entries)) && !partialIgnored {
			s.ack(cons, id.entry, id.ackSet)
		}
		s.readPos = max(s.readPos, min(id.entry+1, uint64(len(s.t.entries))))
		return
	}
	if partialIgnored {
		// Without batch-index acknowledgement a real broker's cursor drops
		// an ack that carries an ack_set (ManagedCursorImpl.asyncDelete
		// keeps no batch indexes).
		return
	}
	s.ack(cons, id.entry, id.ackSet)
}

// handleRedeliver applies a REDELIVER_UNACKNOWLEDGED_MESSAGES. The work is
// bounded by the frame and by what the consumer holds: each message id is
// looked up once, and the entries it names are put back in one go.
func (b *Broker) handleRedeliver(c *conn, body []byte) bool {
	var (
		consumerID uint64
		named      bool
	)
	err := walk(body, func(num protowire.Number, _ protowire.Type, v uint64, bs []byte) error {
		switch num {
		case 1:
			consumerID = v
		case 2:
			named = true
			_, err := decodeMsgID(bs)
			return err
		}
		return nil
	})
	if err != nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cons := b.consumerLocked(c, consumerID)
	if cons == nil {
		return true
	}
	s := cons.sub
	if s.singleActive() && cons != s.active {
		// A request from a consumer that is not the active one is ignored.
		return true
	}
	held := heldEntries(cons, body, named)
	for _, id := range held {
		cons.st.Nacked += s.live(id)
	}
	if s.singleActive() {
		// As a real broker does (ServerCnx.handleRedeliverUnacknowledged):
		// only Shared and Key_Shared redeliver the messages named; on
		// Exclusive and Failover any request rewinds the subscription and
		// every unacknowledged message comes back, uncounted.
		s.rewind()
	} else {
		s.requeue(held, true)
	}
	s.dispatch()
	return true
}

// heldEntries returns, sorted and each once, the entries that cons holds
// unacknowledged and that the REDELIVER_UNACKNOWLEDGED_MESSAGES body names
// (its message ids, already checked), or all that cons holds when named is
// false. Ids of entries that another consumer holds are left out, as a real
// broker looks them up in the consumer's own pending acks
// (Consumer.redeliverUnacknowledgedMessages).
func heldEntries(cons *consumer, body []byte, named bool) []uint64 {
	s := cons.sub
	var ids []uint64
	if !named {
		for id, pc := range s.pending {
			if pc == cons {
				ids = append(ids, id)
			}
		}
	} else {
		_ = walk(body, func(num protowire.Number, _ protowire.Type, _ uint64, bs []byte) error {
			if num == 2 {
				m, _ := decodeMsgID(bs)
				if m.ledger == s.t.ledger && s.pending[m.entry] == cons {
					ids = append(ids, m.entry)
				}
			}
			return nil
		})
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func (b *Broker) handleCloseConsumer(c *conn, body []byte) bool {
	f, err := decodeFlat(body)
	if err != nil {
		return false
	}
	b.mu.Lock()
	if cons := b.consumerLocked(c, f.u[1]); cons != nil {
		b.removeConsumerLocked(cons)
	}
	b.mu.Unlock()
	c.sendSuccess(f.u[2])
	return true
}

func (b *Broker) handleUnsubscribe(c *conn, body []byte) bool {
	f, err := decodeFlat(body)
	if err != nil {
		return false
	}
	reqID := f.u[2]
	force := f.u[3] != 0
	b.mu.Lock()
	defer b.mu.Unlock()
	cons := b.consumerLocked(c, f.u[1])
	if cons == nil {
		c.sendError(reqID, ConsumerNotFound, "pulsartest: unknown consumer")
		return true
	}
	s := cons.sub
	if len(s.consumers) > 1 && !force {
		c.sendError(reqID, NotAllowedError, fmt.Sprintf("pulsartest: subscription %q has %d other consumers connected", s.name, len(s.consumers)-1))
		return true
	}
	for _, other := range append([]*consumer(nil), s.consumers...) {
		if other != cons {
			b.removeConsumerLocked(other)
			other.conn.write(func(o []byte) []byte {
				o, fs, bs := beginFrame(o, cmdCloseConsumer)
				o = appendVarintField(o, 1, other.id)
				o = appendVarintField(o, 2, 0)
				return endFrame(o, cmdCloseConsumer, fs, bs, nil)
			})
		}
	}
	s.durable = false
	b.removeConsumerLocked(cons)
	delete(s.t.subs, s.name)
	c.sendSuccess(reqID)
	return true
}

func (b *Broker) handleGetLastMessageID(c *conn, body []byte) bool {
	f, err := decodeFlat(body)
	if err != nil {
		return false
	}
	reqID := f.u[2]
	b.mu.Lock()
	defer b.mu.Unlock()
	cons := b.consumerLocked(c, f.u[1])
	if cons == nil {
		c.sendError(reqID, ConsumerNotFound, "pulsartest: unknown consumer")
		return true
	}
	t := cons.sub.t
	id := lastID(t)
	// The subscription's mark-delete position (the last entry of its acked
	// prefix, entry -1 when there is none), as a real broker sends it:
	// pulsar-client-go's Reader.HasNext reads it after a SeekByTime.
	markDelete := msgID{ledger: t.ledger, entry: cons.sub.markDelete - 1, partition: -1, batchIndex: -1}
	c.write(func(o []byte) []byte {
		o, fs, bs := beginFrame(o, cmdGetLastMessageIDResp)
		o = appendMsgID(o, 1, id)
		o = appendVarintField(o, 2, reqID)
		o = appendMsgID(o, 3, markDelete)
		return endFrame(o, cmdGetLastMessageIDResp, fs, bs, nil)
	})
	return true
}

// lastID is the id of the last message on t: entry -1 when t is empty, and
// for a batch the index of its last message.
func lastID(t *topic) msgID {
	id := msgID{ledger: t.ledger, entry: math.MaxUint64, partition: t.name.partition, batchIndex: -1}
	if n := len(t.entries); n > 0 {
		id.entry = uint64(n - 1)
		if e := t.entries[n-1]; e.batched {
			id.batchIndex = e.nmsgs - 1
			id.batchSize = e.nmsgs
		}
	}
	return id
}

// handleSeek resets the subscription's cursor to a message id or publish
// time, as Pulsar does: messages from that position on become unacked,
// earlier ones acked, and every consumer of the subscription is closed
// (CLOSE_CONSUMER) so that it reconnects and reads from the new position.
func (b *Broker) handleSeek(c *conn, body []byte) bool {
	var (
		consumerID, reqID uint64
		id                *msgID
		publishTime       uint64
		byTime            bool
	)
	err := walk(body, func(num protowire.Number, _ protowire.Type, v uint64, bs []byte) error {
		switch num {
		case 1:
			consumerID = v
		case 2:
			reqID = v
		case 3:
			m, err := decodeMsgID(bs)
			if err != nil {
				return err
			}
			id = &m
		case 4:
			publishTime, byTime = v, true
		}
		return nil
	})
	if err != nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cons := b.consumerLocked(c, consumerID)
	if cons == nil {
		c.sendError(reqID, ConsumerNotFound, "pulsartest: unknown consumer")
		return true
	}
	s := cons.sub
	t := s.t
	var pos uint64
	switch {
	case byTime:
		pos = uint64(len(t.entries))
		for i, e := range t.entries {
			if entryPublishTime(e) >= publishTime {
				pos = uint64(i)
				break
			}
		}
	case id != nil:
		pos = startPosition(t, subscribeCmd{start: id})
	default:
		c.sendError(reqID, NotAllowedError, "pulsartest: SEEK without message id or publish time")
		return true
	}
	s.markDelete, s.readPos = pos, pos
	clear(s.full)
	clear(s.partial)
	clear(s.pending)
	clear(s.unacked)
	clear(s.holds)
	clear(s.redeliver)
	clear(s.redelivery)
	s.dropDelayed()
	s.replay = s.replay[:0]
	// A non-durable subscription (a reader's) outlives the reconnection:
	// a real broker keeps the reset cursor for the consumer that comes
	// back, which resubscribes with its original start message id.
	durable := s.durable
	s.durable = true
	for _, other := range slices.Clone(s.consumers) {
		b.removeConsumerLocked(other)
		other.conn.sendClose(cmdCloseConsumer, other.id)
	}
	s.durable = durable
	c.sendSuccess(reqID)
	return true
}

func entryPublishTime(e *entry) uint64 {
	meta, _, err := splitPayloadSection(e.data)
	if err != nil {
		return 0
	}
	m, err := decodeMetadata(meta, false)
	if err != nil {
		return 0
	}
	return m.publishTime
}

// handleGetTopicsOfNamespace lists the namespace's topics (partitions by
// their own names, as Pulsar does) for pattern subscriptions; the client
// applies the pattern itself.
func (b *Broker) handleGetTopicsOfNamespace(c *conn, body []byte) bool {
	f, err := decodeFlat(body)
	if err != nil {
		return false
	}
	reqID, ns, mode := f.u[1], f.str(2), f.u[3]
	b.mu.Lock()
	var topics []string
	for name, t := range b.topics {
		if b.partitioned[name] > 0 {
			continue
		}
		persistent := strings.HasPrefix(name, persistentPrefix)
		if (mode == 0 && !persistent) || (mode == 1 && persistent) {
			continue
		}
		rest := name[strings.Index(name, "://")+3:]
		if strings.HasPrefix(rest, ns+"/") && strings.Count(rest, "/") == 2 {
			topics = append(topics, t.name.full)
		}
	}
	b.mu.Unlock()
	slices.Sort(topics)
	c.write(func(o []byte) []byte {
		o, fs, bs := beginFrame(o, cmdGetTopicsOfNamespaceResp)
		o = appendVarintField(o, 1, reqID)
		for _, t := range topics {
			o = appendStringField(o, 2, t)
		}
		o = appendBoolField(o, 3, false)
		o = appendBoolField(o, 5, true)
		return endFrame(o, cmdGetTopicsOfNamespaceResp, fs, bs, nil)
	})
	return true
}

// rangeConflict returns a consumer of s whose sticky hash ranges overlap
// ranges (normalized), or nil. Each range is one binary search in the
// subscription's sorted table.
func rangeConflict(s *subscription, ranges [][2]int32) *consumer {
	for _, r := range ranges {
		// The range starting last at or before r's end is the only one that
		// can reach into r: the table's ranges are disjoint and sorted.
		i, _ := slices.BinarySearchFunc(s.sticky, r[1]+1, func(x stickyRange, v int32) int { return cmp.Compare(x.lo, v) })
		if i > 0 && s.sticky[i-1].hi >= r[0] {
			return s.sticky[i-1].c
		}
	}
	return nil
}

// rangeOrderMsg is the error message for a sticky hash range whose start
// is after its end, which a real broker refuses too
// (HashRangeExclusiveStickyKeyConsumerSelector).
const rangeOrderMsg = "Sticky hash range start > end"

// normalizeRanges checks a consumer's sticky hash ranges and returns them
// sorted, clipped to the hash space [0, 65535] and with the ones that
// overlap or touch merged: the same hashes, in at most 32 768 ranges
// however many the SUBSCRIBE listed. It returns false, and no ranges, if
// one starts after its end.
func normalizeRanges(rs [][2]int32) ([][2]int32, bool) {
	if len(rs) == 0 {
		return nil, true
	}
	for _, r := range rs {
		if r[0] > r[1] {
			return nil, false
		}
	}
	slices.SortFunc(rs, func(a, b [2]int32) int { return cmp.Compare(a[0], b[0]) })
	out := rs[:0]
	for _, r := range rs {
		r[0], r[1] = max(r[0], 0), min(r[1], keyHashRange-1)
		if r[0] > r[1] {
			continue // wholly outside the hash space: it holds no hash
		}
		if n := len(out); n > 0 && out[n-1][1] >= r[0]-1 {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return slices.Clone(out), true
}
