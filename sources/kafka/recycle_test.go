package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: the source reuses a message only after its outcome was
// reported. Every handler sees the payload, key and offset of one record,
// unchanged until it returns (and the race detector sees no write to a
// message that a processor still holds), while far fewer message objects
// than records are used.
func TestMessagesReusedOnlyAfterTheirOutcome(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 3
		c := newCluster(t, parts)
		n := records(4000)
		ends := produce(t, c, parts, 0, n)
		l := newLedger()
		src := cl.new(t, sourceOptions(c, "g-recycle"))

		var mu sync.Mutex
		objects := map[*message.Message[[]byte]]bool{}
		var bad []string
		p := startPipeline(t, pipeline.Options[[]byte, []byte]{
			Name:     "recycle",
			Producer: producer.Options[[]byte]{Source: src, Flow: producer.Flow{Initial: 40}},
			Processors: processor.Options[[]byte, []byte]{
				Concurrency: 4,
				Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
					md, ok := message.MetadataAs[*kafka.Metadata](m)
					if !ok || m.BatchKey() != "" {
						// A reused message must not carry what a handler
						// did to its previous record.
						mu.Lock()
						bad = append(bad, fmt.Sprintf("on entry: metadata %T, batch key %q", m.Metadata, m.BatchKey()))
						mu.Unlock()
						return m.Data, nil
					}
					data, key, off := m.Data, md.Key, md.Offset
					check := func(when string) {
						// Records are produced with key "k<i>" and value "v<i>".
						if !bytes.Equal(m.Data, data) || !bytes.Equal(md.Key, key) || md.Offset != off ||
							!bytes.Equal(data[1:], key[1:]) {
							mu.Lock()
							bad = append(bad, fmt.Sprintf("%s: offset %d key %q data %q", when, md.Offset, md.Key, m.Data))
							mu.Unlock()
						}
					}
					check("on entry")
					if rand.IntN(50) == 0 {
						time.Sleep(time.Millisecond)
					}
					check("before return")
					if off%7 == 0 {
						// Handlers may change a message; the next record
						// to use its slot must not see it.
						m.SetBatchKey("handled")
						m.Metadata = "replaced"
					}
					mu.Lock()
					objects[m] = true
					mu.Unlock()
					l.add(md)
					return m.Data, nil
				},
			},
		})
		wait.Within(t, loadWait(30*time.Second, 4000), "every record handled", func() bool { return l.covers(ends) })
		stopPipeline(t, p)
		mu.Lock()
		defer mu.Unlock()
		if len(bad) > 0 {
			t.Fatalf("%d handlers saw a message change under them or carry another record, first: %s", len(bad), bad[0])
		}
		if d := l.duplicates(); d != 0 {
			t.Fatalf("%d records handled twice", d)
		}
		// Without reuse there would be one object per record.
		if len(objects) > n/4 {
			t.Fatalf("%d message objects for %d records: acknowledged messages are not reused", len(objects), n)
		}
		t.Logf("%d message objects for %d records", len(objects), n)
	})
}
