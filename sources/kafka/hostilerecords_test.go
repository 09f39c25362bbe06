package kafka_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: records with no key or value, keys and values that are not
// UTF-8, duplicate, empty, huge or a thousand headers, read in one fetch
// with records that have none, are each handled once with their own value,
// key (nil when the record has none) and headers in the order produced;
// Header returns the first header of a name.
func TestOddRecordsArriveAsProduced(t *testing.T) {
	many := make([]kgo.RecordHeader, 1000)
	for i := range many {
		many[i] = kgo.RecordHeader{Key: fmt.Sprint("h", i%10), Value: []byte{byte(i)}}
	}
	// A produced record keeps its context: each client's cluster gets new ones.
	records := func() []*kgo.Record {
		return []*kgo.Record{
			{Value: []byte("no-key")},
			{Key: []byte("no-value")},
			{Key: []byte("\xff\xfe"), Value: []byte("bad-utf8\xc0"), Headers: []kgo.RecordHeader{{Key: "\xff", Value: []byte("\x00")}}},
			{Value: []byte("dup"), Headers: []kgo.RecordHeader{{Key: "d", Value: []byte("first")}, {Key: "", Value: nil}, {Key: "d", Value: []byte("second")}}},
			{Value: []byte("many"), Headers: many},
			{Value: []byte("huge"), Headers: []kgo.RecordHeader{{Key: "big", Value: bytes.Repeat([]byte("x"), 256<<10)}}},
			{Value: []byte("plain-after")},
		}
	}
	eachClient(t, func(t *testing.T, cl client) {
		recs := records()
		for _, r := range recs {
			r.Topic = testTopic
		}
		c := newCluster(t, 1)
		produceSync(t, c, recs)
		var mu sync.Mutex
		got := map[int64]kafka.Metadata{}
		data := map[int64][]byte{}
		count := map[int64]int{}
		l := newLedger()
		po := pipelineOpts("odd", cl.new(t, sourceOptions(c, "g-odd")), 1, l, func(m *message.Message[[]byte]) error {
			md, _ := message.MetadataAs[*kafka.Metadata](m)
			mu.Lock()
			defer mu.Unlock()
			got[md.Offset] = *md
			data[md.Offset] = bytes.Clone(m.Data)
			count[md.Offset]++
			return nil
		})
		p := startPipeline(t, po)
		wait.Within(t, 20*time.Second, "every record", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == len(recs) })
		stopPipeline(t, p)
		for i, r := range recs {
			off := int64(i)
			md := got[off]
			if count[off] != 1 {
				t.Errorf("record %d: handled %d times", i, count[off])
			}
			if !bytes.Equal(data[off], r.Value) {
				t.Errorf("record %d: value %.20q, want %.20q", i, data[off], r.Value)
			}
			if !bytes.Equal(md.Key, r.Key) || (md.Key == nil) != (r.Key == nil) {
				t.Errorf("record %d: key %q (nil %v), want %q (nil %v)", i, md.Key, md.Key == nil, r.Key, r.Key == nil)
			}
			if len(md.Headers) != len(r.Headers) {
				t.Errorf("record %d: %d headers, want %d", i, len(md.Headers), len(r.Headers))
				continue
			}
			for j, h := range r.Headers {
				if string(md.Headers[j].Key) != h.Key || !bytes.Equal(md.Headers[j].Value, h.Value) {
					t.Errorf("record %d header %d: %q=%.20q, want %q=%.20q", i, j, md.Headers[j].Key, md.Headers[j].Value, h.Key, h.Value)
				}
			}
		}
		dup, none := got[3], got[0]
		if v, ok := dup.Header("d"); !ok || string(v) != "first" {
			t.Errorf("Header(%q) of the record with it twice: %q, %v, want the first", "d", v, ok)
		}
		if _, ok := none.Header(""); ok {
			t.Errorf("Header(%q) of a record without headers found one", "")
		}
	})
}
