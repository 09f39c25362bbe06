package kafkatopic_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// Guarantee: a partition that holds a record batch the client cannot
// decode (its CRC does not match) ends a balanced subscription: Receive
// hands out the records before it, then returns, within a bound, an
// error wrapping ErrCorruptBatch that names the partition and the
// batch's offset, and the backend logs it on one ERROR line; rather than
// Receive waiting for ever while the backend logs the same WARN line for
// each of sarama's fetches of the same bytes.
func TestBalancedReceiveFailsWhenAPartitionHoldsABatchThatCannotBeDecoded(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions(c, topic.StringCodec{})
	logs := &logBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	b := newBackend(t, o)
	h := newTopic(t, b, "corrupt", topic.Options{})
	s := subscribe(t, h, topic.Balanced("g"))
	for _, v := range []string{"a", "b", "c"} {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"a", "b", "c"} {
		it := recv(t, s)
		if it.Value != want {
			t.Fatalf("received %q, want %q", it.Value, want)
		}
		if err := s.Ack(it.ID); err != nil {
			t.Fatal(err)
		}
	}
	// From now on (the fetch waiting for records at offset 3 is answered
	// as usual), offset 3 holds a batch that cannot be decoded.
	hits := testbroker.ServeCorruptBatch(c, "corrupt", 0, 3)
	receiveCorrupt(t, s, hits, `"corrupt"/0 from offset 3`)
	out := logs.String()
	if n := strings.Count(out, "partition fetch cannot be decoded"); n != 1 {
		t.Fatalf("%d ERROR lines for the batch, want 1:\n%s", n, out)
	}
	if n := warnLines(out, "error decoding packet"); n != 0 {
		t.Fatalf("%d WARN lines for the batch, want none:\n%s", n, out)
	}
}

// Guarantee: a partition that holds a record batch the client cannot
// decode ends a broadcast subscription: Receive hands out the records
// before it, then returns, within a bound, an error wrapping
// ErrCorruptBatch that names the partition and the batch's offset, and
// the backend logs it on one ERROR line; rather than Receive waiting for
// ever while the backend logs the same WARN line for each of sarama's
// fetches of the same bytes.
func TestBroadcastReceiveFailsWhenAPartitionHoldsABatchThatCannotBeDecoded(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions(c, topic.StringCodec{})
	logs := &logBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	b := newBackend(t, o)
	h := newTopic(t, b, "corrupt", topic.Options{Mode: topic.BroadcastOnly})
	s := subscribe(t, h, topic.Broadcast())
	for _, v := range []string{"a", "b", "c"} {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"a", "b", "c"} {
		if it := recv(t, s); it.Value != want {
			t.Fatalf("received %q, want %q", it.Value, want)
		}
	}
	// From now on (the fetch waiting for records at offset 3 is answered
	// as usual), offset 3 holds a batch that cannot be decoded.
	hits := testbroker.ServeCorruptBatch(c, "corrupt", 0, 3)
	receiveCorrupt(t, s, hits, `"corrupt"/0 from offset 3`)
	out := logs.String()
	if n := strings.Count(out, "partition fetch cannot be decoded"); n != 1 {
		t.Fatalf("%d ERROR lines for the batch, want 1:\n%s", n, out)
	}
	if n := warnLines(out, "error decoding packet"); n != 0 {
		t.Fatalf("%d WARN lines for the batch, want none:\n%s", n, out)
	}
}

// receiveCorrupt fails t unless s's Receive returns, within patience, an
// error wrapping ErrCorruptBatch that names the partition and offset as
// where does; hits counts the answers with the batch.
func receiveCorrupt[T any](t *testing.T, s *topic.Subscription[T], hits *atomic.Int64, where string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	_, err := s.Receive(ctx)
	if !errors.Is(err, kafkatopic.ErrCorruptBatch) {
		t.Fatalf("Receive = %v after %d answers with a batch that cannot be decoded, want an error wrapping ErrCorruptBatch", err, hits.Load())
	}
	if msg := err.Error(); !strings.Contains(msg, where) {
		t.Fatalf("Receive's error %q does not name the partition and the batch's offset (%s)", msg, where)
	}
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

// Guarantee: when the record before a batch the client cannot decode was
// itself skipped as undecodable, the error Receive returns names the
// batch's offset, the one after the skipped record, not the skipped
// record's own.
func TestBalancedCorruptBatchErrorNamesTheOffsetAfterASkippedRecord(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, testOptions(c, topic.Codec[int](topic.IntCodec{})))
	h := newTopic(t, b, "corrupt-after-skip", topic.Options{})
	s := subscribe(t, h, topic.Balanced("g"))
	for v := range 2 {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
	}
	for want := range 2 {
		it := recv(t, s)
		if it.Value != want {
			t.Fatalf("received %d, want %d", it.Value, want)
		}
		if err := s.Ack(it.ID); err != nil {
			t.Fatal(err)
		}
	}
	produceGarbage(t, c.ListenAddrs(), "corrupt-after-skip", 0, 1) // offset 2
	wait.Within(t, patience, "the record that does not decode skipped", func() bool { return h.Stats().Undecodable == 1 })
	hits := testbroker.ServeCorruptBatch(c, "corrupt-after-skip", 0, 3)
	receiveCorrupt(t, s, hits, `"corrupt-after-skip"/0 from offset 3`)
}

// Guarantee: when the batch that cannot be decoded is the first a
// member's claim of the partition reads (where its group starts), the
// error Receive returns names that offset.
func TestBalancedCorruptBatchErrorNamesTheOffsetAClaimStartsFrom(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, testOptions(c, topic.StringCodec{}))
	h := newTopic(t, b, "corrupt-at-start", topic.Options{})
	for _, v := range []string{"a", "b"} {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
	}
	hits := testbroker.ServeCorruptBatch(c, "corrupt-at-start", 0, 2)
	s := subscribe(t, h, topic.Balanced("g")) // a new group: it starts at the log end, offset 2
	receiveCorrupt(t, s, hits, `"corrupt-at-start"/0 from offset 2`)
}
