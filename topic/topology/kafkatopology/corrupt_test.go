package kafkatopology

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// lockedBuffer collects log lines, safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// expectReaderFailsOnCorruptBatch reads, with a reader of tb's topology
// (subscribed before the letters are published), three letters from
// partition 0 of its main topic "orders", after which the next batch
// (offset 3) cannot be decoded, and checks that Receive and TryReceive then return
// within a bound an error wrapping ErrCorruptBatch that names the
// partition and the offset, logged once at ERROR and on no WARN line.
func expectReaderFailsOnCorruptBatch(t *testing.T, tb *topology.Builder) {
	t.Helper()
	c := testbroker.Kafka(t)
	logs := &lockedBuffer{}
	b, err := New(Options[topologytest.Msg]{
		Brokers:       c.ListenAddrs(),
		Config:        testbroker.SaramaConfig(),
		Codec:         topic.JSONCodec[topologytest.Msg]{},
		AdminTimeout:  30 * time.Second,
		RevokeTimeout: 2 * time.Second,
		Logger:        slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "the backend", b.Close) })
	q := declare(t, b, tb)
	r := subscribe(t, q)
	for n := range 3 {
		if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	for n := range 3 {
		l := receiveOne(t, r)
		if l.Value.N != n {
			t.Fatalf("received letter %d, want %d", l.Value.N, n)
		}
		if err := r.Settle(t.Context(), &l); err != nil {
			t.Fatal(err)
		}
	}
	// From now on (the fetch waiting for records at offset 3 is answered
	// as usual), offset 3 holds a batch that cannot be decoded.
	hits := testbroker.ServeCorruptBatch(c, "orders", 0, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = r.Receive(ctx, make([]topology.Letter[msg], 1))
	if !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("Receive = %v after %d answers with a batch that cannot be decoded, want an error wrapping ErrCorruptBatch", err, hits.Load())
	}
	if msg := err.Error(); !strings.Contains(msg, `"orders"/0 from offset 3`) {
		t.Fatalf("Receive's error %q does not name the partition and the batch's offset", msg)
	}
	if _, err := r.TryReceive(t.Context(), make([]topology.Letter[msg], 1)); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("TryReceive = %v, want an error wrapping ErrCorruptBatch", err)
	}
	out := logs.String()
	if n := strings.Count(out, "partition fetch cannot be decoded"); n != 1 {
		t.Fatalf("%d ERROR lines for the batch, want 1:\n%s", n, out)
	}
	if n := warnLines(out, "error decoding packet"); n != 0 {
		t.Fatalf("%d WARN lines for the batch, want none:\n%s", n, out)
	}
}

// Guarantee: a partition of a topology's main topic that holds a record
// batch the client cannot decode (its CRC does not match) stops the
// group reader: Receive hands out the letters before it, then returns,
// within a bound, an error wrapping ErrCorruptBatch that names the
// partition and the batch's offset, and the backend logs it on one ERROR
// line; rather than Receive waiting for ever while the backend logs the
// same WARN line for each of sarama's fetches of the same bytes.
func TestGroupReaderFailsWhenAPartitionHoldsABatchThatCannotBeDecoded(t *testing.T) {
	expectReaderFailsOnCorruptBatch(t, topology.New("orders"))
}

// Guarantee: the same holds for a broadcast topology's reader, which
// otherwise waits for ever without a word (its partition consumers'
// errors were dropped).
func TestBroadcastReaderFailsWhenAPartitionHoldsABatchThatCannotBeDecoded(t *testing.T) {
	expectReaderFailsOnCorruptBatch(t, topology.New("orders").Broadcast())
}

// warnLines counts the WARN lines of out that contain s (sarama's other
// errors of the same moment, such as its broker connection closing after
// the answer it could not decode, may be logged once each).
func warnLines(out, s string) int {
	n := 0
	for line := range strings.Lines(out) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, s) {
			n++
		}
	}
	return n
}
