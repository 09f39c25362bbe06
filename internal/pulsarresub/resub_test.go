package pulsarresub_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/pulsarresub"
)

const msg = "subscribed again"

// Guarantee: the first notice that a partition is active is its first
// subscribe and counts nothing; each later notice of the same partition
// is a resubscription, counted in Count and in the total, and logged at
// WARN naming the partition's topic; a notice that it is inactive counts
// nothing.
func TestEachActiveNoticeAfterAPartitionsFirstIsAResubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		var total atomic.Uint64
		total.Store(10)
		l := pulsarresub.New(slog.New(slog.NewTextHandler(&lines, nil)), msg, &total)
		l.BecameActive(nil, "t-partition-0", 0)
		l.BecameActive(nil, "t-partition-1", 1)
		l.BecameInactive(nil, "t-partition-0", 0)
		if l.Count() != 0 || total.Load() != 10 || len(lines.All()) != 0 {
			t.Fatalf("first notices of two partitions: count %d, total %d, lines %q; want 0, 10 and none", l.Count(), total.Load(), lines.All())
		}
		l.BecameActive(nil, "t-partition-0", 0)
		if l.Count() != 1 || total.Load() != 11 {
			t.Fatalf("a second notice of a partition: count %d, total %d; want 1 and 11", l.Count(), total.Load())
		}
		lines.Want(t, 1, "WARN lines naming the partition", "level=WARN", "msg=\""+msg+"\"", "partition_topic=t-partition-0")
		l.BecameActive(nil, "t-partition-1", 1)
		l.BecameActive(nil, "t-partition-0", 0)
		if l.Count() != 3 || total.Load() != 13 {
			t.Fatalf("two more notices: count %d, total %d; want 3 and 13", l.Count(), total.Load())
		}
	})
}

// Guarantee: a burst of resubscriptions logs one line and holds the
// others back; Flush logs their count, so that the lines tell of every
// resubscription.
func TestFlushTellsTheResubscriptionsHeldBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		l := pulsarresub.New(slog.New(slog.NewTextHandler(&lines, nil)), msg, nil)
		for range 4 {
			l.BecameActive(nil, "t", -1)
		}
		l.Flush(context.Background())
		if records, events := lines.Told("level=WARN", msg); records != 2 || events != 3 || l.Count() != 3 {
			t.Fatalf("3 resubscriptions, then Flush: %d WARN lines telling of %d, count %d; want 2 lines telling of 3, count 3:\n%q",
				records, events, l.Count(), lines.All())
		}
	})
}

// Guarantee: a Listener made with no logger logs on slog.Default().
func TestANilLoggerMeansTheDefault(t *testing.T) {
	lines := logtest.CaptureDefault(t)
	l := pulsarresub.New(nil, msg, nil)
	l.BecameActive(nil, "t", -1)
	l.BecameActive(nil, "t", -1)
	lines.Want(t, 1, "lines on the default logger", msg, "partition_topic=t")
}
