package kafka_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// claimed returns the partitions of the test topic a member claims.
func claimed(ms kafka.MemberStats) []int32 {
	var out []int32
	for _, p := range ms.Partitions {
		if p.Topic == testTopic {
			out = append(out, p.Partition)
		}
	}
	return out
}

// onlyMember returns the single member of a source's stats.
func onlyMember(t *testing.T, src testSource) kafka.MemberStats {
	t.Helper()
	st := src.Stats()
	if len(st.Members) != 1 {
		t.Fatalf("stats show %d members, want 1: %+v", len(st.Members), st)
	}
	return st.Members[0]
}

// Guarantee: Stats shows the member's assignment, the offsets the broker
// holds as committed, the high-water marks and the lag per partition while
// part of the backlog is handled, and a new generation and assignment after
// a second member joins.
func TestStatsReportAssignmentCommittedAndLag(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts, n, stop = 3, 300, 40
		group := "g-stats"
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, n)
		gate := make(chan struct{})
		open := sync.OnceFunc(func() { close(gate) })
		opts := sourceOptions(c, group)
		opts.Unordered = true
		src := cl.new(t, opts)
		l := newLedger()
		po := pipelineOpts("stats", src, 1, l, func(m *message.Message[[]byte]) error {
			if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Offset == stop {
				<-gate // each partition's commit stops at offset 40
			}
			return nil
		})
		// One message per processor at a time: the three stuck ones hold three
		// processors, the others handle the rest.
		po.Processors.Concurrency = 2 * parts
		po.Processors.MaxDemand = 1
		a := startPipeline(t, po)
		defer stopPipeline(t, a)
		defer open() // before the stop

		want := map[int32]int64{0: stop, 1: stop, 2: stop}
		wait.Within(t, 20*time.Second, "the broker to hold offset 40 as committed on every partition", func() bool {
			return equalOffsets(committed(c, group), want)
		})
		// The broker's view and the source's agree.
		wait.Within(t, 10*time.Second, "stats to match the broker", func() bool {
			ms := onlyMember(t, src)
			if len(ms.Partitions) != parts {
				return false
			}
			broker := committed(c, group)
			for _, p := range ms.Partitions {
				if p.Committed != broker[p.Partition] || p.HighWater != ends[p.Partition] {
					return false
				}
			}
			return true
		})
		ms := onlyMember(t, src)
		if ms.MemberID == "" || ms.GenerationID < 1 || ms.Rebalances != 1 {
			t.Fatalf("member id %q, generation %d, rebalances %d: want an id, a generation and 1 rebalance", ms.MemberID, ms.GenerationID, ms.Rebalances)
		}
		if gi := c.GroupInfo(group); gi == nil || gi.Epoch != ms.GenerationID || len(gi.Members) != 1 || gi.Members[0].MemberID != ms.MemberID {
			t.Fatalf("stats generation %d, member %q; the broker's group: %+v", ms.GenerationID, ms.MemberID, gi)
		}
		if got := claimed(ms); !slices.Equal(got, []int32{0, 1, 2}) {
			t.Fatalf("stats assignment %v, want [0 1 2]", got)
		}
		for _, p := range ms.Partitions {
			if p.Committed != stop || p.Marked != stop || p.Lag != ends[p.Partition]-stop {
				t.Errorf("partition %d: committed %d, marked %d, lag %d; want %d, %d, %d", p.Partition, p.Committed, p.Marked, p.Lag,
					stop, stop, ends[p.Partition]-stop)
			}
			if p.Next <= stop || p.Next > ends[p.Partition] || p.FetchLag != p.HighWater-p.Next {
				t.Errorf("partition %d: next %d, fetch lag %d, high water %d", p.Partition, p.Next, p.FetchLag, p.HighWater)
			}
			if p.InFlight < 1 {
				t.Errorf("partition %d: %d in flight while its record %d is in a handler", p.Partition, p.InFlight, stop)
			}
		}
		if ms.Commits == 0 || ms.CommitErrors != 0 || ms.LastCommitError != nil {
			t.Fatalf("commits %d, errors %d (%v): want commits and no error", ms.Commits, ms.CommitErrors, ms.LastCommitError)
		}

		// Everything handled: the lag drops to 0.
		open()
		wait.Within(t, 20*time.Second, "lag 0 on every partition", func() bool {
			ms := onlyMember(t, src)
			for _, p := range ms.Partitions {
				if p.Lag != 0 || p.Committed != ends[p.Partition] {
					return false
				}
			}
			return len(ms.Partitions) == parts
		})

		// A second member joins: a new generation, and the partitions split.
		gen := ms.GenerationID
		srcB := cl.new(t, sourceOptions(c, group))
		b := startPipeline(t, pipelineOpts("stats-b", srcB, 1, newLedger(), nil))
		defer stopPipeline(t, b)
		wait.Within(t, 20*time.Second, "the partitions split over two members in a new generation", func() bool {
			sa, sb := src.Stats(), srcB.Stats()
			if len(sa.Members) != 1 || len(sb.Members) != 1 {
				return false
			}
			ma, mb := sa.Members[0], sb.Members[0]
			all := append(claimed(ma), claimed(mb)...)
			slices.Sort(all)
			return ma.GenerationID > gen && mb.GenerationID == ma.GenerationID && ma.Rebalances >= 2 &&
				len(claimed(ma)) > 0 && len(claimed(mb)) > 0 && slices.Equal(all, []int32{0, 1, 2}) &&
				ma.MemberID != mb.MemberID
		})
	})
}

// Guarantee: a new group that starts at the newest record is not
// reported behind by the topic's history: while it has no committed
// offset, a partition's lag counts from where its claim started (the
// first record it took), so it is 0 while nothing came after the history
// and then counts the records since.
func TestStatsLagOfANewGroupCountsFromWhereItStarted(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts, history = 2, 100
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, history)
		gate := make(chan struct{})
		open := sync.OnceFunc(func() { close(gate) })
		var mu sync.Mutex
		first := map[int32]int64{} // the first record each partition's claim took
		opts := sourceOptions(c, "g-new-at-latest")
		opts.InitialOffset = kafka.OffsetLatest
		src := cl.new(t, opts)
		a := startPipeline(t, pipelineOpts("lag-latest", src, 1, newLedger(), func(m *message.Message[[]byte]) error {
			md, _ := message.MetadataAs[*kafka.Metadata](m)
			mu.Lock()
			if _, ok := first[md.Partition]; !ok {
				first[md.Partition] = md.Offset
			}
			mu.Unlock()
			<-gate // the records published after the start wait in the handler
			return nil
		}))
		defer stopPipeline(t, a)
		defer open() // before the stop

		partitions := func() []kafka.PartitionStats {
			st := src.Stats()
			if len(st.Members) != 1 {
				return nil
			}
			return st.Members[0].Partitions
		}
		state := func() string {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Sprintf("partitions %+v, log ends %v, first records taken %v", partitions(), ends, first)
		}
		// sarama reports the high-water mark of a fetch that returns no
		// record: with it known and nothing new, the lag is 0. (franz-go
		// reports a high-water mark with records only.)
		if cl.name == saramaClient.name {
			wait.For(t, "both partitions claimed, their high-water marks known", func() bool {
				ps := partitions()
				for _, p := range ps {
					if p.HighWater != ends[p.Partition] {
						return false
					}
				}
				return len(ps) == parts
			}, state)
			for _, p := range partitions() {
				if p.Lag != 0 {
					t.Errorf("partition %d of a group started at the newest record: lag %d, want 0 (%+v)", p.Partition, p.Lag, p)
				}
			}
		}

		// Records published after the start, held in the handler. A claim
		// places itself at the log end as it starts fetching, which the
		// test cannot see: publish one record a partition at a time until
		// each partition's claim has taken one.
		published := history
		var last time.Time
		wait.For(t, "a record of each partition taken after the history", func() bool {
			mu.Lock()
			n := len(first)
			mu.Unlock()
			if n == parts {
				return true
			}
			if time.Since(last) > 200*time.Millisecond {
				produce(t, c, parts, published, parts)
				published += parts
				last = time.Now()
			}
			return false
		}, state)
		mu.Lock()
		taken := maps.Clone(first)
		mu.Unlock()
		for _, p := range partitions() {
			from := taken[p.Partition]
			if from < ends[p.Partition] || p.HighWater <= from || p.Lag != p.HighWater-from {
				t.Errorf("partition %d, first record taken at %d (history up to %d): lag %d, want high water %d − %d (%+v)",
					p.Partition, from, ends[p.Partition], p.Lag, p.HighWater, from, p)
			}
		}
	})
}

// Guarantee: Stats is safe to call while records flow and members come
// and go (run with -race).
func TestStatsConcurrentWithFlow(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 2
		group := "g-stats-race"
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, 400)
		src := cl.new(t, sourceOptions(c, group))
		l := newLedger()
		done := make(chan struct{})
		var polls int
		var wg sync.WaitGroup
		// pipeline.New validates its options, reading the source: poll once
		// the pipeline runs.
		p := startPipeline(t, pipelineOpts("stats-race", src, 2, l, nil))
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				st := src.Stats()
				polls++
				for _, m := range st.Members {
					for _, p := range m.Partitions {
						if p.Lag < 0 || p.FetchLag < 0 || p.InFlight < 0 {
							panic(fmt.Sprintf("negative stats: %+v", p))
						}
					}
				}
			}
		})
		wait.Within(t, 20*time.Second, "every record", func() bool { return l.covers(ends) })
		stopPipeline(t, p)
		close(done)
		wg.Wait()
		if polls == 0 {
			t.Fatal("Stats never returned")
		}
	})
}

// Guarantee: a commit the broker refuses is reported in Stats (count, last
// error naming its partitions) and its offsets go out again with the next
// commit.
func TestStatsReportCommitErrors(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 2
		group := "g-stats-commit-error"
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, 100)
		var refused atomic.Int32
		c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			r := req.(*kmsg.OffsetCommitRequest)
			if r.Group != group || refused.Load() >= 2 {
				return nil, nil, false
			}
			refused.Add(1)
			resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
			for _, rt := range r.Topics {
				st := kmsg.NewOffsetCommitResponseTopic()
				st.Topic, st.TopicID = rt.Topic, rt.TopicID
				for _, rp := range rt.Partitions {
					sp := kmsg.NewOffsetCommitResponseTopicPartition()
					sp.Partition = rp.Partition
					sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		})
		src := cl.new(t, sourceOptions(c, group))
		l := newLedger()
		p := startPipeline(t, pipelineOpts("commit-errors", src, 1, l, nil))
		defer stopPipeline(t, p)
		wait.Within(t, 20*time.Second, "the refused commits, then the offsets committed", func() bool {
			return refused.Load() == 2 && equalOffsets(committed(c, group), ends)
		})
		ms := onlyMember(t, src)
		if ms.CommitErrors < 2 || ms.LastCommitError == nil || !errors.Is(ms.LastCommitError, cl.brokerErr(kerr.OffsetMetadataTooLarge)) {
			t.Fatalf("commit errors %d, last %v: want 2 refusals reported", ms.CommitErrors, ms.LastCommitError)
		}
		if ce := ms.LastCommitError; len(ce.Partitions) == 0 || ce.At.IsZero() || strings.ContainsAny(ce.Error(), "\r\n") {
			t.Fatalf("last commit error %+v: want its partitions and time, on one line", ce)
		}
		// The broker records a commit before the member reads its answer.
		wait.Within(t, 5*time.Second, "Stats to show what the broker committed", func() bool {
			ms := onlyMember(t, src)
			for _, p := range ms.Partitions {
				if p.Committed != ends[p.Partition] {
					return false
				}
			}
			return len(ms.Partitions) == parts
		})
	})
}

// Guarantee: a partition that keeps rewinding to redeliver a failed message
// reports the high-water mark its rewound reads last saw, and the lag it
// makes, also while it waits out the backoff between two rewinds: a
// partition stalled by a failing message shows its lag growing.
func TestStatsLagOfAPartitionWaitingToRedeliverCountsWhatItHasNotHandled(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const group, later = "g-stats-redeliver", 100
		c := newCluster(t, 1)
		produce(t, c, 1, 0, 1)
		opts := sourceOptions(c, group)
		opts.FailurePolicy = kafka.FailureRedeliver
		opts.RedeliveryBackoff = 500 * time.Millisecond
		src := cl.new(t, opts)
		var mu sync.Mutex
		deliveries := map[int64]int{}
		delivered := func(off int64) int {
			mu.Lock()
			defer mu.Unlock()
			return deliveries[off]
		}
		// Offset 0 fails on its first delivery, making the partition
		// rewind; offset 50 fails on every delivery until the test has
		// seen the partition rewind to it twice; the others succeed.
		var healed atomic.Bool
		p := startPipeline(t, pipelineOpts("stats-redeliver", src, 1, newLedger(), func(m *message.Message[[]byte]) error {
			md, _ := message.MetadataAs[*kafka.Metadata](m)
			mu.Lock()
			deliveries[md.Offset]++
			n := deliveries[md.Offset]
			mu.Unlock()
			if md.Offset == 0 && n == 1 || md.Offset == 50 && !healed.Load() {
				return errors.New("not yet")
			}
			return nil
		}))
		defer stopPipeline(t, p)
		// The records after offset 0 are produced once the partition has
		// rewound to it: only the rewound read fetches them.
		wait.Within(t, 20*time.Second, "offset 0 delivered again", func() bool { return delivered(0) >= 2 })
		produce(t, c, 1, 1, later)
		wait.Within(t, 20*time.Second, "offset 50 failed", func() bool { return delivered(50) >= 1 })
		// From offset 50's first failure on, the partition rewinds to it
		// and waits out the backoff, again and again; the high-water mark
		// stays at least what the fetch that returned offset 50 saw.
		samples := 0
		deadline := time.Now().Add(20 * time.Second)
		for delivered(50) < 3 {
			ps := onlyMember(t, src).Partitions
			if len(ps) == 1 && (ps[0].HighWater < 51 || ps[0].Lag < 1) {
				t.Fatalf("partition waiting to redeliver offset 50 reports high water %d and lag %d, want at least 51 and 1",
					ps[0].HighWater, ps[0].Lag)
			}
			if time.Now().After(deadline) {
				t.Fatalf("offset 50 delivered %d times in 20s, want 3", delivered(50))
			}
			samples++
			time.Sleep(5 * time.Millisecond)
		}
		healed.Store(true)
		t.Logf("%d samples while offset 50 waited to be redelivered", samples)
	})
}

// Guarantee: a claim of a partition the group committed reports that
// offset as Committed from the start, before it commits anything itself.
func TestStatsReportTheGroupsCommittedOffsetAsAClaimStarts(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		group := "g-stats-resume"
		c := newCluster(t, 1)
		ends := produce(t, c, 1, 0, 20)
		l := newLedger()
		first := startPipeline(t, pipelineOpts("first", cl.new(t, sourceOptions(c, group)), 1, l, nil))
		wait.Within(t, 20*time.Second, "every record handled", func() bool { return l.covers(ends) })
		stopPipeline(t, first)
		if got := committed(c, group); !equalOffsets(got, ends) {
			t.Fatalf("committed %v after the first run, want %v", got, ends)
		}
		opts := sourceOptions(c, group)
		opts.CommitInterval = time.Hour // the claim commits nothing of its own
		src := cl.new(t, opts)
		second := startPipeline(t, pipelineOpts("second", src, 1, newLedger(), nil))
		defer stopPipeline(t, second)
		// The franz-go source lists the claim as it is assigned, before its
		// start offset is known (Next -1).
		wait.Within(t, 20*time.Second, "the partition claimed again at a known offset", func() bool {
			ms := src.Stats().Members
			return len(ms) == 1 && len(ms[0].Partitions) == 1 && ms[0].Partitions[0].Next >= 0
		})
		if ps := onlyMember(t, src).Partitions[0]; ps.Committed != ends[0] {
			t.Fatalf("claim resuming at the group's offset %d reports Committed %d", ends[0], ps.Committed)
		}
	})
}
