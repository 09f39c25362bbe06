package pulsartest

// This file holds the broker's own encoding of the Pulsar binary protocol:
// frame layout, command type numbers, field numbers of the commands the
// broker reads and writes, and the message metadata it needs to inspect.
// Everything is encoded and decoded by hand with protowire; field numbers
// follow the public Pulsar wire protocol.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Command type numbers of BaseCommand. In BaseCommand the field that carries
// a command has the same number as the command's type.
const (
	cmdConnect                  = 2
	cmdConnected                = 3
	cmdSubscribe                = 4
	cmdProducer                 = 5
	cmdSend                     = 6
	cmdSendReceipt              = 7
	cmdSendError                = 8
	cmdMessage                  = 9
	cmdAck                      = 10
	cmdFlow                     = 11
	cmdUnsubscribe              = 12
	cmdSuccess                  = 13
	cmdError                    = 14
	cmdCloseProducer            = 15
	cmdCloseConsumer            = 16
	cmdProducerSuccess          = 17
	cmdPing                     = 18
	cmdPong                     = 19
	cmdRedeliver                = 20
	cmdPartitionedMeta          = 21
	cmdPartitionedMetaResp      = 22
	cmdLookup                   = 23
	cmdLookupResp               = 24
	cmdConsumerStats            = 25
	cmdSeek                     = 28
	cmdGetLastMessageID         = 29
	cmdGetLastMessageIDResp     = 30
	cmdActiveConsumerChange     = 31
	cmdGetTopicsOfNamespace     = 32
	cmdGetTopicsOfNamespaceResp = 33
	cmdGetSchema                = 34
	cmdAuthResponse             = 37
	cmdAckResponse              = 38
	cmdGetOrCreateSchema        = 39
	cmdNewTxn                   = 50
	cmdAddPartitionToTxn        = 52
	cmdAddSubscriptionToTxn     = 54
	cmdEndTxn                   = 56
	cmdEndTxnOnPartition        = 58
	cmdEndTxnOnSubscription     = 60
	cmdTcClientConnect          = 62
	cmdWatchTopicList           = 64
	cmdWatchTopicListClose      = 67
)

// cmdNames names command types for logs and error messages.
var cmdNames = map[int]string{
	cmdConnect: "CONNECT", cmdSubscribe: "SUBSCRIBE", cmdProducer: "PRODUCER", cmdSend: "SEND",
	cmdAck: "ACK", cmdFlow: "FLOW", cmdUnsubscribe: "UNSUBSCRIBE", cmdCloseProducer: "CLOSE_PRODUCER",
	cmdCloseConsumer: "CLOSE_CONSUMER", cmdPing: "PING", cmdPong: "PONG",
	cmdRedeliver: "REDELIVER_UNACKNOWLEDGED_MESSAGES", cmdPartitionedMeta: "PARTITIONED_METADATA",
	cmdLookup: "LOOKUP", cmdConsumerStats: "CONSUMER_STATS", cmdSeek: "SEEK",
	cmdGetLastMessageID: "GET_LAST_MESSAGE_ID", cmdGetTopicsOfNamespace: "GET_TOPICS_OF_NAMESPACE",
	cmdGetSchema: "GET_SCHEMA", cmdAuthResponse: "AUTH_RESPONSE", cmdGetOrCreateSchema: "GET_OR_CREATE_SCHEMA",
	cmdNewTxn: "NEW_TXN", cmdAddPartitionToTxn: "ADD_PARTITION_TO_TXN",
	cmdAddSubscriptionToTxn: "ADD_SUBSCRIPTION_TO_TXN", cmdEndTxn: "END_TXN",
	cmdEndTxnOnPartition: "END_TXN_ON_PARTITION", cmdEndTxnOnSubscription: "END_TXN_ON_SUBSCRIPTION",
	cmdTcClientConnect: "TC_CLIENT_CONNECT_REQUEST", cmdWatchTopicList: "WATCH_TOPIC_LIST",
	cmdWatchTopicListClose: "WATCH_TOPIC_LIST_CLOSE",
}

func cmdName(t int) string {
	if n, ok := cmdNames[t]; ok {
		return n
	}
	return fmt.Sprintf("command type %d", t)
}

// requestIDField is, for commands the broker does not implement, the field
// number of their request id, so the broker can answer them with an ERROR.
var requestIDField = map[int]protowire.Number{
	cmdConsumerStats: 1, cmdGetSchema: 1, cmdGetOrCreateSchema: 1,
	cmdNewTxn: 1, cmdAddPartitionToTxn: 1, cmdAddSubscriptionToTxn: 1, cmdEndTxn: 1,
	cmdEndTxnOnPartition: 1, cmdEndTxnOnSubscription: 1, cmdTcClientConnect: 1,
	cmdWatchTopicList: 1, cmdWatchTopicListClose: 1,
}

// Subscription types (CommandSubscribe.SubType).
const (
	subExclusive = 0
	subShared    = 1
	subFailover  = 2
	subKeyShared = 3
)

var subTypeNames = [...]string{"Exclusive", "Shared", "Failover", "Key_Shared"}

// Protocol limits and constants.
const (
	magicCRC32C        = 0x0e01
	maxProtocolVersion = 20
	maxMessageSize     = 5 << 20
	maxFrameSize       = maxMessageSize + 64<<10
	keyHashRange       = 65536
	// minBatchedMessage is the fewest bytes one message of a batch takes in
	// the batch's uncompressed payload: its 4-byte metadata size and a
	// SingleMessageMetadata holding at least its required payload_size
	// field (2 bytes).
	minBatchedMessage = 6
	// maxBatchMessages is the most messages a batch can hold: producers
	// keep a batch's uncompressed payload within the maximum message size.
	maxBatchMessages = maxMessageSize / minBatchedMessage
)

// errBatchSize is wrapped when a batch's num_messages_in_batch is more than
// its payload can hold.
var errBatchSize = errors.New("pulsartest: batch holds fewer messages than num_messages_in_batch says")

// checkBatchSize returns an error wrapping errBatchSize unless the
// metadata's message count fits the entry's payload of n bytes (for a
// compressed entry, its declared uncompressed size): each message takes at
// least minBatchedMessage bytes, and a batch holds at most maxBatchMessages.
func checkBatchSize(m entryMeta, n int) error {
	if !m.batched {
		return nil
	}
	if m.compression != compressNone {
		n = m.uncompressed
	}
	if m.numMessages > maxBatchMessages || int64(m.numMessages)*minBatchedMessage > int64(n) {
		return fmt.Errorf("%w: %d messages in %d bytes (at most %d messages, %d bytes each at least)",
			errBatchSize, m.numMessages, n, maxBatchMessages, minBatchedMessage)
	}
	return nil
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errMalformed is wrapped by every decoding failure.
var errMalformed = errors.New("pulsartest: malformed frame")

// ---- encoding helpers ----

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendBoolField(b []byte, num protowire.Number, v bool) []byte {
	return appendVarintField(b, num, protowire.EncodeBool(v))
}

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// endNested wraps b[start:] as the length-delimited field num, moving the
// already-encoded body right to make room for its tag and length. It avoids
// a scratch buffer per nested message.
func endNested(b []byte, num protowire.Number, start int) []byte {
	n := len(b) - start
	var hdr [16]byte
	h := protowire.AppendTag(hdr[:0], num, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(n))
	b = append(b, h...)
	copy(b[start+len(h):], b[start:start+n])
	copy(b[start:], h)
	return b
}

// beginFrame appends the frame header placeholders and BaseCommand.type and
// returns the offsets endFrame needs.
func beginFrame(b []byte, typ int) (out []byte, frameStart, bodyStart int) {
	frameStart = len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	b = appendVarintField(b, 1, uint64(typ))
	return b, frameStart, len(b)
}

// endFrame closes the command body started by beginFrame, appends the
// optional payload (already carrying magic, checksum and metadata) and fills
// in the sizes.
func endFrame(b []byte, typ, frameStart, bodyStart int, payload []byte) []byte {
	b = endNested(b, protowire.Number(typ), bodyStart)
	cmdSize := len(b) - frameStart - 8
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b[frameStart:], uint32(len(b)-frameStart-4))
	binary.BigEndian.PutUint32(b[frameStart+4:], uint32(cmdSize))
	return b
}

// msgID is MessageIdData.
type msgID struct {
	ledger, entry uint64
	partition     int32
	batchIndex    int32
	// batchSize is what the client says; the broker never relies on it
	// (it uses the size of the batch it stored).
	batchSize int32
	ackSet    ackSet
}

// ackSet is the ack_set of a MessageIdData (bit i set: batch index i is
// still unacknowledged). It keeps the encoded MessageIdData and decodes
// the words as they are read, so that however many words a client sends,
// the broker allocates nothing for them and reads no more of them than the
// batch it stored has.
type ackSet struct {
	// msg is the MessageIdData, checked by decodeMsgID. It aliases the
	// frame being handled: read it before the handler returns.
	msg   []byte
	words int // number of words; 0 when the id carries no ack_set
}

// errStop ends a walk early; it never leaves the function that uses it.
var errStop = errors.New("stop")

// each calls fn with every word of the ack_set in order, with its index,
// until fn returns false.
func (a ackSet) each(fn func(i int, w uint64) bool) {
	i := 0
	_ = walk(a.msg, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
		if num != 5 {
			return nil
		}
		if typ == protowire.VarintType {
			if !fn(i, v) {
				return errStop
			}
			i++
			return nil
		}
		for len(bs) > 0 {
			x, n := protowire.ConsumeVarint(bs)
			if n < 0 || !fn(i, x) {
				return errStop
			}
			i++
			bs = bs[n:]
		}
		return nil
	})
}

func appendMsgID(b []byte, num protowire.Number, id msgID) []byte {
	start := len(b)
	b = appendVarintField(b, 1, id.ledger)
	b = appendVarintField(b, 2, id.entry)
	if id.partition >= 0 {
		b = appendVarintField(b, 3, uint64(int64(id.partition)))
	}
	if id.batchIndex >= 0 {
		b = appendVarintField(b, 4, uint64(int64(id.batchIndex)))
	}
	if id.batchSize > 0 {
		b = appendVarintField(b, 6, uint64(int64(id.batchSize)))
	}
	return endNested(b, num, start)
}

// ---- decoding helpers ----

// walk calls fn for every field of the protobuf message b. For varint and
// fixed fields v is the value; for length-delimited fields bs is the body.
func walk(b []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		var (
			v  uint64
			bs []byte
		)
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			bs, n = protowire.ConsumeBytes(b)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(b)
			v = uint64(v32)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v, bs); err != nil {
			return err
		}
	}
	return nil
}

// countInt64s counts the values of a repeated int64 field given either
// unpacked (one varint) or packed (a length-delimited run of varints),
// checking that a packed run decodes.
func countInt64s(typ protowire.Type, bs []byte) (int, error) {
	if typ == protowire.VarintType {
		return 1, nil
	}
	if typ != protowire.BytesType {
		return 0, fmt.Errorf("%w: ack_set of wire type %d", errMalformed, typ)
	}
	n := 0
	for len(bs) > 0 {
		_, m := protowire.ConsumeVarint(bs)
		if m < 0 {
			return 0, errMalformed
		}
		n++
		bs = bs[m:]
	}
	return n, nil
}

func decodeMsgID(b []byte) (msgID, error) {
	id := msgID{partition: -1, batchIndex: -1}
	err := walk(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
		var err error
		switch num {
		case 1:
			id.ledger = v
		case 2:
			id.entry = v
		case 3:
			id.partition = int32(v)
		case 4:
			id.batchIndex = int32(v)
		case 5:
			var n int
			n, err = countInt64s(typ, bs)
			id.ackSet.words += n
		case 6:
			id.batchSize = int32(v)
		}
		return err
	})
	if id.ackSet.words > 0 {
		id.ackSet.msg = b
	}
	return id, err
}

func decodeKeyValue(b []byte) (k, v string, err error) {
	err = walk(b, func(num protowire.Number, _ protowire.Type, _ uint64, bs []byte) error {
		switch num {
		case 1:
			k = string(bs)
		case 2:
			v = string(bs)
		}
		return nil
	})
	return k, v, err
}

// command is one decoded BaseCommand: its type and the body of the command
// field. Bodies are decoded on demand by the handlers.
type command struct {
	typ  int
	body []byte
}

func decodeBase(b []byte) (command, error) {
	var c command
	err := walk(b, func(num protowire.Number, _ protowire.Type, v uint64, bs []byte) error {
		if num == 1 {
			c.typ = int(v)
		} else if bs != nil || c.body == nil {
			c.body = bs
		}
		return nil
	})
	if err == nil && c.typ == 0 {
		err = fmt.Errorf("%w: BaseCommand without type", errMalformed)
	}
	return c, err
}

// fieldsOf decodes the scalar fields of a flat command into a small map
// keyed by field number; length-delimited fields go to bs. Only used on
// control-path commands.
type flat struct {
	u  map[protowire.Number]uint64
	bs map[protowire.Number][]byte
}

func decodeFlat(b []byte) (flat, error) {
	f := flat{u: map[protowire.Number]uint64{}, bs: map[protowire.Number][]byte{}}
	err := walk(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
		if typ == protowire.BytesType {
			f.bs[num] = bs
		} else {
			f.u[num] = v
		}
		return nil
	})
	return f, err
}

func (f flat) str(n protowire.Number) string { return string(f.bs[n]) }

// ---- message metadata ----

// entryMeta is what the broker reads from an entry's MessageMetadata.
type entryMeta struct {
	producerName string
	sequenceID   uint64
	publishTime  uint64
	properties   map[string]string
	partitionKey string // set only by a full decode (withProps)
	keyRaw       []byte // partition key bytes, aliasing the input
	orderingKey  []byte
	compression  uint64
	uncompressed int
	numMessages  int32
	batched      bool
	eventTime    uint64
	deliverAt    int64
	numChunks    int32
	uuid         []byte // chunked message id, aliasing the input
	chunkID      int32
}

// decodeMetadata reads MessageMetadata. With full false (the SEND path) it
// skips the fields that would need copies: properties, producer name and
// the partition key as a string (keyRaw aliases b instead).
func decodeMetadata(b []byte, full bool) (entryMeta, error) {
	withProps := full
	m := entryMeta{numMessages: 1}
	err := walk(b, func(num protowire.Number, _ protowire.Type, v uint64, bs []byte) error {
		switch num {
		case 1:
			if withProps {
				m.producerName = string(bs)
			}
		case 2:
			m.sequenceID = v
		case 3:
			m.publishTime = v
		case 4:
			if withProps {
				k, val, err := decodeKeyValue(bs)
				if err != nil {
					return err
				}
				if m.properties == nil {
					m.properties = map[string]string{}
				}
				m.properties[k] = val
			}
		case 6:
			m.keyRaw = bs
			if withProps {
				m.partitionKey = string(bs)
			}
		case 8:
			m.compression = v
		case 9:
			m.uncompressed = int(v)
		case 11:
			m.numMessages = int32(min(v, math.MaxInt32))
			m.batched = true
		case 12:
			m.eventTime = v
		case 18:
			m.orderingKey = bs
		case 19:
			m.deliverAt = int64(v)
		case 26:
			m.uuid = bs
		case 27:
			m.numChunks = int32(v)
		case 29:
			m.chunkID = int32(v)
		}
		return nil
	})
	return m, err
}

// singleMeta is SingleMessageMetadata, the header of one message in a batch.
type singleMeta struct {
	properties   map[string]string
	partitionKey string
	payloadSize  int
	eventTime    uint64
	orderingKey  []byte
}

func decodeSingleMeta(b []byte) (singleMeta, error) {
	var m singleMeta
	err := walk(b, func(num protowire.Number, _ protowire.Type, v uint64, bs []byte) error {
		switch num {
		case 1:
			k, val, err := decodeKeyValue(bs)
			if err != nil {
				return err
			}
			if m.properties == nil {
				m.properties = map[string]string{}
			}
			m.properties[k] = val
		case 2:
			m.partitionKey = string(bs)
		case 3:
			m.payloadSize = int(int32(v))
		case 5:
			m.eventTime = v
		case 7:
			m.orderingKey = bs
		}
		return nil
	})
	return m, err
}

// splitPayloadSection splits [magic][crc][metaSize][meta][payload], checking
// the magic number and the CRC32-C over everything after the checksum.
func splitPayloadSection(b []byte) (meta, payload []byte, err error) {
	if len(b) < 10 {
		return nil, nil, fmt.Errorf("%w: payload section of %d bytes", errMalformed, len(b))
	}
	if binary.BigEndian.Uint16(b) != magicCRC32C {
		return nil, nil, fmt.Errorf("%w: bad magic 0x%04x", errMalformed, binary.BigEndian.Uint16(b))
	}
	want := binary.BigEndian.Uint32(b[2:])
	if got := crc32.Checksum(b[6:], crcTable); got != want {
		return nil, nil, fmt.Errorf("%w: checksum 0x%08x, computed 0x%08x", ErrChecksum, want, got)
	}
	n := binary.BigEndian.Uint32(b[6:])
	if uint64(n) > uint64(len(b)-10) {
		return nil, nil, fmt.Errorf("%w: metadata size %d", errMalformed, n)
	}
	return b[10 : 10+n], b[10+n:], nil
}

// buildPayloadSection encodes [magic][crc][metaSize][meta][payload].
func buildPayloadSection(meta, payload []byte) []byte {
	b := make([]byte, 10, 10+len(meta)+len(payload))
	binary.BigEndian.PutUint16(b, magicCRC32C)
	binary.BigEndian.PutUint32(b[6:], uint32(len(meta)))
	b = append(b, meta...)
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], crcTable))
	return b
}

// murmur3 computes the 32-bit Murmur3 hash (seed 0) used for key-shared
// routing, so that key hashes match what Pulsar brokers compute.
func murmur3(data []byte) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	var h uint32
	n := len(data)
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= c1
		k = k<<15 | k>>17
		k *= c2
		h ^= k
		h = h<<13 | h>>19
		h = h*5 + 0xe6546b64
		data = data[4:]
	}
	var k uint32
	switch len(data) {
	case 3:
		k ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(data[0])
		k *= c1
		k = k<<15 | k>>17
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
