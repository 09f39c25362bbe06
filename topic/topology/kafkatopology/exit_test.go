package kafkatopology

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topictest"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// syncLog is a log sink safe for the reader goroutines.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *syncLog) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// Guarantee: a codec whose Decode ends the reading goroutine
// (runtime.Goexit, as t.FailNow does) on a record makes that record one
// that does not decode, for a group reader and for a broadcast reader:
// it is logged once, with the stack of the exit, skipped and counted
// (Undecodable), as a record whose history headers do not parse is (its
// line, which follows at once, held back and said as the reader closes),
// and the reader delivers the next letter; a record for another group is
// skipped without being counted; Close returns.
func TestDecodeGoexitSkipsTheRecordAndTheReaderGoesOn(t *testing.T) {
	for _, broadcast := range []bool{false, true} {
		name := "group"
		if broadcast {
			name = "broadcast"
		}
		t.Run(name, func(t *testing.T) {
			var logs syncLog
			b, err := New(Options[msg]{
				Brokers: testbroker.Kafka(t).ListenAddrs(), Config: testbroker.SaramaConfig(),
				Codec:        topictest.ExitingCodec[msg]{Codec: topic.JSONCodec[msg]{}},
				AdminTimeout: 30 * time.Second, RevokeTimeout: 2 * time.Second,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { topologytest.MustClose(t, "the backend", b.Close) })
			tb := topology.New("exits")
			if broadcast {
				tb = tb.Broadcast()
			}
			q := declare(t, b, tb)
			r := subscribe(t, q)
			for _, rec := range []*sarama.ProducerMessage{
				{Topic: "exits", Partition: 0, Value: sarama.StringEncoder("not json")},
				{Topic: "exits", Partition: 0, Value: sarama.StringEncoder(`{"N":3}`), Headers: []sarama.RecordHeader{header(HeaderRetries, "-1")}},
				{Topic: "exits", Partition: 0, Value: sarama.StringEncoder(`{"N":4}`), Headers: []sarama.RecordHeader{header(HeaderGroup, "billing")}},
			} {
				if err := b.send(rec); err != nil {
					t.Fatal(err)
				}
			}
			if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 2}}); err != nil {
				t.Fatal(err)
			}
			got := receiveOne(t, r)
			if got.Value.N != 2 {
				t.Fatalf("received %+v, want message 2", got.Value)
			}
			if err := r.Settle(t.Context(), &got); err != nil {
				t.Fatal(err)
			}
			topologytest.MustClose(t, "the reader", r.Close)
			out := logs.String()
			if strings.Count(out, "does not decode") != 2 || strings.Count(out, "stack=") != 1 || !strings.Contains(out, "ExitingCodec") ||
				!strings.Contains(out, "held_back=1 held_back_first=1 held_back_last=1") {
				t.Fatalf("logs %q, want one line about each record that does not decode, one with the stack of the exit", out)
			}
			if n := r.(topology.UndecodableCounter).Undecodable(); n != 2 {
				t.Fatalf("Undecodable() = %d, want 2 (the record the codec exited on and the one with a bad header, not the other group's)", n)
			}
		})
	}
}
