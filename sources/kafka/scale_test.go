package kafka_test

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/logattr"
	"github.com/boulevard-go/boulevard/internal/logtest"
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
		// Long enough for one commit round trip on a machine that stalls
		// the process; one request per partition still takes parts/10 of it.
		opts.RevokeTimeout = 10 * time.Second
		opts.Config.Consumer.Group.Rebalance.Timeout = 20 * time.Second // above RevokeTimeout
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

// BenchmarkStatsAtManyPartitions measures, with each client, a running
// member's Stats with every partition of a topic claimed (64, 1,000 and
// 4,000 partitions; BOULEVARD_SCALE_PARTITIONS adds its own count): the
// source's Stats, and the pipeline's, which reads each partition's feed.
func BenchmarkStatsAtManyPartitions(b *testing.B) {
	counts := []int32{64, 1000, 4000}
	if n := scalePartitions(0); n > 0 {
		counts = []int32{n}
	}
	for _, cl := range clients {
		for _, parts := range counts {
			b.Run(fmt.Sprintf("%s/partitions=%d", cl.name, parts), func(b *testing.B) {
				c := newCluster(b, parts)
				ends := produce(b, c, parts, 0, int(parts))
				l := newLedger()
				opts := sourceOptions(c, "g-stats-"+cl.name)
				opts.Logger = slog.New(slog.DiscardHandler)
				src := cl.new(b, opts)
				po := pipelineOpts("stats", src, 1, l, nil)
				po.Logger = slog.New(slog.DiscardHandler)
				po.Producer.Flow = producer.Flow{}
				p := startPipeline(b, po)
				defer stopPipeline(b, p)
				wait.Within(b, 5*time.Minute, "every record handled", func() bool { return l.covers(ends) },
					func() string { return fmt.Sprintf("%d of %d handled", l.total, parts) })
				b.Run("source", func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if st := src.Stats(); len(st.Members[0].Partitions) != int(parts) {
							b.Fatalf("%d partitions in Stats, want %d", len(st.Members[0].Partitions), parts)
						}
					}
				})
				b.Run("pipeline", func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if n := len(p.Stats().Producers[0].Feeds); n != int(parts) {
							b.Fatalf("%d feeds in Stats, want %d", n, parts)
						}
					}
				})
			})
		}
	}
}

// Guarantee: the line a member logs when its group session starts names at
// most logattr.MaxListed of the partitions it claims and counts them all,
// whatever their number: one line of a bounded size, with either client.
func TestSessionStartLineNamesTheFirstPartitionsAndCountsThemAll(t *testing.T) {
	parts := scalePartitions(64)
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, int(parts))
		var lines logtest.Lines
		opts := sourceOptions(c, "g-session-line-"+cl.name)
		opts.Logger = slog.New(slog.NewTextHandler(&lines, nil))
		l := newLedger()
		po := pipelineOpts("session-line", cl.new(t, opts), 1, l, nil)
		po.Logger = slog.New(slog.DiscardHandler)
		po.Producer.Flow = producer.Flow{}
		p := startPipeline(t, po)
		wait.Within(t, 5*time.Minute, "every record handled", func() bool { return l.covers(ends) })
		stopPipeline(t, p)
		started := lines.Matching("kafka group session started")
		if len(started) == 0 {
			t.Fatal("no session started line")
		}
		counted := false
		for _, line := range started {
			if len(line) > 2<<10 {
				t.Errorf("session started line of %d bytes, want at most 2 KiB: %.300q...", len(line), line)
			}
			if n := strings.Count(line, testTopic+"/"); n > logattr.MaxListed {
				t.Errorf("session started line names %d partitions, want at most %d", n, logattr.MaxListed)
			}
			counted = counted || strings.Contains(line, fmt.Sprintf(" claims_count=%d", parts))
		}
		if !counted {
			t.Errorf("no session started line counts the %d partitions claimed (claims_count=%d): %q", parts, parts, started)
		}
	})
}
