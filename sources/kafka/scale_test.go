package kafka_test

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
)

// scalePartitions is the partition count of the scale tests:
// BOULEVARD_SCALE_PARTITIONS, or def.
func scalePartitions(def int32) int32 {
	if v, err := strconv.Atoi(os.Getenv("BOULEVARD_SCALE_PARTITIONS")); err == nil && v > 0 {
		return int32(v)
	}
	return def
}

// perPartition is the goroutines a member runs per partition it claims:
// the source's reader, and with sarama five of sarama's own (its claim,
// session and partition consumer goroutines).
var perPartition = map[string]int{"franz": 1, "sarama": 6}

// Guarantee: a group member claiming every partition of a topic with many
// partitions (BOULEVARD_SCALE_PARTITIONS, 64 by default) handles each record
// once, commits every partition's end, shows every partition in Stats,
// runs a set number of goroutines per partition claimed (perPartition,
// plus at most 200 for the pipeline, the client and the cluster), and
// stops within its shutdown timeout.
func TestSourceHandlesEveryPartitionOnceAndCommitsAtManyPartitions(t *testing.T) {
	parts := scalePartitions(64)
	const perPart = 4
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, int(parts)*perPart)
		base := runtime.NumGoroutine()
		group := "g-scale-" + cl.name
		l := newLedger()
		opts := sourceOptions(c, group)
		opts.CommitInterval = 50 * time.Millisecond
		opts.Logger = slog.New(slog.DiscardHandler)
		po := pipelineOpts("scale", cl.new(t, opts), 1, l, nil)
		po.Logger = slog.New(slog.DiscardHandler)
		po.Producer.Flow = producer.Flow{}
		start := time.Now()
		p := startPipeline(t, po)
		wait.Within(t, 5*time.Minute, "every record handled", func() bool { return l.covers(ends) },
			func() string { return fmt.Sprintf("%d of %d handled", l.total, int(parts)*perPart) })
		handledIn := time.Since(start)
		wait.Within(t, 5*time.Minute, "every partition committed at its end", func() bool {
			return equalOffsets(committed(c, group), ends)
		}, func() string { return fmt.Sprintf("%d of %d partitions committed", len(committed(c, group)), parts) })
		g := runtime.NumGoroutine() - base
		if bound := 200 + perPartition[cl.name]*int(parts); g > bound {
			t.Errorf("%d goroutines with %d partitions claimed, want at most %d (200 + %d per partition)",
				g, parts, bound, perPartition[cl.name])
		}
		st := time.Now()
		for range 10 {
			if n := len(p.Stats().Producers[0].Feeds); n != int(parts) {
				t.Fatalf("Stats shows %d partitions' feeds, want %d", n, parts)
			}
		}
		statsIn := time.Since(st) / 10
		stop := time.Now()
		stopPipeline(t, p)
		if d := l.duplicates(); d != 0 {
			t.Errorf("%d records handled more than once", d)
		}
		t.Logf("%s: %d partitions: handled in %v, %d goroutines, Stats %v, stopped in %v",
			cl.name, parts, handledIn, g, statsIn, time.Since(stop))
	})
}

// Guarantee: a member that lets go of many partitions at once (its
// pipeline stops, or an eager rebalance revokes them all) commits every
// partition's handled offsets within RevokeTimeout, even when each commit
// takes a round trip longer than RevokeTimeout divided by the partition
// count: the offsets of the partitions released together go out together,
// and the records are not handed to the next owner a second time.
func TestMemberReleasingManyPartitionsCommitsThemAllWithinRevokeTimeout(t *testing.T) {
	parts := scalePartitions(64)
	const perPart = 2
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, int(parts)*perPart)
		group := "g-release-" + cl.name
		l := newLedger()
		opts := sourceOptions(c, group)
		opts.CommitInterval = time.Hour // only the releases commit
		opts.RevokeTimeout = 2 * time.Second
		opts.Logger = slog.New(slog.DiscardHandler)
		po := pipelineOpts("release", cl.new(t, opts), 1, l, nil)
		po.Logger = slog.New(slog.DiscardHandler)
		p := startPipeline(t, po)
		wait.Within(t, 5*time.Minute, "every record handled", func() bool { return l.covers(ends) },
			func() string { return fmt.Sprintf("%d of %d handled", l.total, int(parts)*perPart) })
		// Each commit from now on takes a round trip of a tenth of
		// RevokeTimeout: one request per partition would take
		// parts/10 RevokeTimeouts.
		rtt := opts.RevokeTimeout / 10
		c.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			c.SleepControl(func() { time.Sleep(rtt) })
			return nil, nil, false
		})
		start := time.Now()
		stopPipeline(t, p)
		took := time.Since(start)
		if got := committed(c, group); !equalOffsets(got, ends) {
			missing := 0
			for part, end := range ends {
				if got[part] != end {
					missing++
				}
			}
			t.Errorf("%d of %d partitions not committed at their end after the member let them go (stop took %v, RevokeTimeout %v, commit round trip %v)",
				missing, parts, took, opts.RevokeTimeout, rtt)
		}
	})
}
