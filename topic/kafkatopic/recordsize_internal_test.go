package kafkatopic

import (
	"fmt"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Guarantee: recordSize is the size a broker compares with a topic's
// max.message.bytes: the length of a record batch (magic 2) holding the
// record alone, uncompressed, or before Kafka 0.11 of a message set
// (magic 1) holding it, as another client's encoder (franz-go's kmsg)
// writes them, whatever the key, value and headers, across the sizes
// where their varint lengths grow.
func TestRecordSizeIsTheEncodedBatchLength(t *testing.T) {
	keys := [][]byte{nil, {}, []byte("k"), make([]byte, 64)}
	values := []int{0, 1, 63, 64, 8191, 8192, 1 << 20}
	headers := [][]sarama.RecordHeader{
		nil,
		{{Key: []byte("a")}},
		{{Key: make([]byte, 70), Value: make([]byte, 200)}, {Key: []byte("b"), Value: []byte("c")}},
	}
	for _, key := range keys {
		for _, n := range values {
			for _, hdrs := range headers {
				m := &sarama.ProducerMessage{Value: sarama.ByteEncoder(make([]byte, n)), Headers: hdrs}
				if key != nil {
					m.Key = sarama.ByteEncoder(key)
				}
				name := fmt.Sprintf("key %d bytes (nil %t), value %d bytes, %d headers", len(key), key == nil, n, len(hdrs))

				rec := kmsg.Record{Key: key, Value: make([]byte, n)}
				for _, h := range hdrs {
					rec.Headers = append(rec.Headers, kmsg.Header{Key: string(h.Key), Value: h.Value})
				}
				rec.Length = int32(len(rec.AppendTo(nil)) - 1) // the body, after a 1-byte zero length
				batch := kmsg.RecordBatch{Magic: 2, NumRecords: 1, Records: rec.AppendTo(nil)}
				if got, want := recordSize(m, true), len(batch.AppendTo(nil)); got != want {
					t.Errorf("%s: recordSize = %d, the record batch has %d bytes", name, got, want)
				}

				if len(hdrs) > 0 {
					continue // magic 1 has no headers
				}
				msg := kmsg.MessageV1{Magic: 1, Key: key, Value: make([]byte, n)}
				if got, want := recordSize(m, false), len(msg.AppendTo(nil)); got != want {
					t.Errorf("%s: recordSize before 0.11 = %d, the message set has %d bytes", name, got, want)
				}
			}
		}
	}
}
