package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// produceOverTime writes n records round-robin over the partitions in small
// batches spread over roughly d, and returns the end offsets.
func produceOverTime(t *testing.T, c *kfake.Cluster, parts int32, n int, d time.Duration) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Error(err)
		return nil
	}
	defer cl.Close()
	const batch = 50
	steps := max(1, n/batch)
	pause := d / time.Duration(steps)
	ends := map[int32]int64{}
	for i := 0; i < n; {
		recs := make([]*kgo.Record, 0, batch)
		for ; len(recs) < batch && i < n; i++ {
			p := int32(i) % parts
			ends[p]++
			recs = append(recs, &kgo.Record{Topic: testTopic, Partition: p, Value: []byte(strconv.Itoa(i))})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Error(err)
			return nil
		}
		time.Sleep(pause)
	}
	return ends
}

// Guarantee: members joining and leaving while records flow, with the eager
// (range) and the cooperative-sticky strategies, lose no record and never
// commit past a record that was not handled.
func TestMembersJoinAndLeaveDuringLoad(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		for _, strategy := range []string{kafka.RebalanceRange, kafka.RebalanceCooperativeSticky} {
			t.Run(strategy, func(t *testing.T) {
				const parts = 6
				group := "g-rebalance-" + strategy
				c := newCluster(t, parts)
				l := newLedger()
				watch := watchCommits(c, group, l)
				opts := sourceOptions(c, group)
				opts.Rebalance = strategy
				slow := func(*message.Message[[]byte]) error { time.Sleep(200 * time.Microsecond); return nil }

				var ends map[int32]int64
				var wg sync.WaitGroup
				wg.Go(func() { ends = produceOverTime(t, c, parts, records(3000), 2*time.Second) })

				// Each membership change waits until the group has settled on
				// the members of the previous step, with records flowing.
				settled := func(members int) {
					t.Helper()
					wait.Within(t, 20*time.Second, "records handled", func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.total > 0 })
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					if _, err := c.WaitGroupInfo(ctx, group, func(gi *kfake.GroupInfo) bool {
						return gi != nil && len(gi.Members) == members && gi.NumAssigned() == parts
					}); err != nil {
						t.Fatalf("the group did not settle on %d members: %v", members, err)
					}
				}
				a := startPipeline(t, pipelineOpts("a", cl.new(t, opts), 2, l, slow))
				settled(2)
				b := startPipeline(t, pipelineOpts("b", cl.new(t, opts), 1, l, slow)) // joins
				settled(3)
				stopPipeline(t, a) // leaves
				settled(1)
				c2 := startPipeline(t, pipelineOpts("c", cl.new(t, opts), 1, l, slow)) // joins
				wg.Wait()
				if ends == nil {
					t.FailNow()
				}
				wait.Within(t, loadWait(30*time.Second, 3000), "every record handled", func() bool { return l.covers(ends) })
				wait.Within(t, 15*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
				stopPipeline(t, b)
				stopPipeline(t, c2)
				watch.check(t)
				t.Logf("%s: %d records, %d handled twice", strategy, l.total-l.duplicates(), l.duplicates())
			})
		}
	})
}

// Guarantee: under cooperative-sticky, a member joining does not stop the
// partitions the existing member keeps: their claims are never revoked (all
// their records carry the generation they were first claimed in), while the
// partitions that move are claimed by the new member in a later generation.
// With franz-go, whose member starts a session at each rebalance, the
// existing member's "session started" line at the rebalance that moves
// partitions away counts the partitions it kept (claims_count), and names
// those it gained apart (new_claims).
func TestCooperativeKeepsRetainedPartitionsFlowing(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 4
		group := "g-coop-flow"
		c := newCluster(t, parts)
		l := newLedger()
		opts := sourceOptions(c, group)
		opts.Rebalance = kafka.RebalanceCooperativeSticky
		var mu sync.Mutex
		// partition -> member -> claim generations seen in its records
		claims := map[int32]map[string]map[int32]bool{}
		track := func(m *message.Message[[]byte]) error {
			md, _ := message.MetadataAs[*kafka.Metadata](m)
			mu.Lock()
			defer mu.Unlock()
			if claims[md.Partition] == nil {
				claims[md.Partition] = map[string]map[int32]bool{}
			}
			if claims[md.Partition][md.MemberID] == nil {
				claims[md.Partition][md.MemberID] = map[int32]bool{}
			}
			claims[md.Partition][md.MemberID][md.GenerationID] = true
			return nil
		}
		produce(t, c, parts, 0, 400)
		var aLines logtest.Lines
		aOpts := opts
		aOpts.Logger = slog.New(slog.NewTextHandler(&aLines, nil))
		a := startPipeline(t, pipelineOpts("a", cl.new(t, aOpts), 1, l, track))
		wait.Within(t, 10*time.Second, "first batch", func() bool { return l.covers(map[int32]int64{0: 100, 1: 100, 2: 100, 3: 100}) })
		b := startPipeline(t, pipelineOpts("b", cl.new(t, opts), 1, l, track))
		if _, err := c.WaitGroupInfo(context.Background(), group, func(gi *kfake.GroupInfo) bool {
			return gi.NumAssigned() == parts && len(gi.Members) == 2 && gi.Members[0].NumAssigned() > 0 && gi.Members[1].NumAssigned() > 0
		}); err != nil {
			t.Fatal(err)
		}
		ends := produce(t, c, parts, 400, 400)
		for p := range ends {
			ends[p] += 100
		}
		wait.Within(t, 20*time.Second, "second batch", func() bool { return l.covers(ends) })
		stopPipeline(t, b)
		stopPipeline(t, a)
		mu.Lock()
		defer mu.Unlock()
		retained, moved := 0, 0
		for part, members := range claims {
			switch len(members) {
			case 1: // kept by the first member all along
				for member, gens := range members {
					if len(gens) != 1 {
						t.Errorf("partition %d stayed with %s but was claimed again (generations %v): it was revoked", part, member, gens)
					}
				}
				retained++
			case 2:
				moved++
			}
		}
		if retained == 0 || moved == 0 {
			t.Fatalf("%d partitions retained, %d moved; the new member should take some and leave the rest", retained, moved)
		}
		// (sarama's session outlives a cooperative rebalance: it starts
		// none.) The line of the rebalance that moved partitions to b;
		// b's leave may start another, which gives them back to a.
		if started := aLines.Matching("kafka group session started"); cl.name == franzClient.name &&
			!slices.ContainsFunc(started, func(l string) bool {
				return strings.Contains(l, fmt.Sprintf(" claims_count=%d new_claims=", retained))
			}) {
			t.Errorf("the first member kept %d partitions; its session started lines: %q", retained, started)
		}
	})
}

// Guarantee: after an abrupt stop (the drain cut short, nothing waited for)
// and a restart, no record is lost, nothing unhandled was committed, and the
// records handled twice are bounded by what was in flight when the stop came:
// the windows and the processors' queues and chunks. The stop comes at a
// known moment: the handlers hold every record past the first 1000 until
// Stop has returned, and everything handled before was committed, so the
// only records the restart can redo are those the first pipeline still held.
func TestAbruptStopAndRestart(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts, handledFirst = 4, 1000
		group := "g-abrupt"
		c := newCluster(t, parts)
		l := newLedger()
		watch := watchCommits(c, group, l)
		var entered atomic.Int64
		held := make(chan struct{})
		hold := func(*message.Message[[]byte]) error {
			if entered.Add(1) > handledFirst {
				<-held // ignores the cancelled context, as a slow handler would
			}
			return nil
		}
		po := pipelineOpts("first", cl.new(t, sourceOptions(c, group)), 2, l, hold)
		first := startPipeline(t, po)
		release := sync.OnceFunc(func() { close(held) })
		defer release() // lets the held handlers return if the test fails early
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := c.WaitGroupInfo(ctx, group, func(gi *kfake.GroupInfo) bool {
			return gi != nil && len(gi.Members) == 2 && gi.NumAssigned() == parts && gi.Members[0].NumAssigned() > 0 && gi.Members[1].NumAssigned() > 0
		}); err != nil {
			t.Fatalf("the first pipeline's members did not share the partitions: %v", err)
		}
		ends := produce(t, c, parts, 0, records(4000))
		wait.Within(t, 20*time.Second, "the first records handled", func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.total == handledFirst
		})
		// A chunk's acknowledgements travel together, so the records
		// handled in the chunks now held are not committed; everything
		// else handled is.
		topo := first.Topology().Processors
		wait.Within(t, 10*time.Second, "commits of everything handled outside the held chunks", func() bool {
			done := committed(c, group)
			uncommitted := int64(0)
			for p, o := range l.handledPrefix(parts) {
				uncommitted += o - done[p]
			}
			return uncommitted <= int64(topo.Concurrency*(topo.MaxDemand-1))
		})
		stopCtx, stopNow := context.WithCancel(context.Background())
		stopNow()
		_ = first.Stop(stopCtx) // cut short: reports ErrShutdownTimeout or nothing
		release()
		second := startPipeline(t, pipelineOpts("second", cl.new(t, sourceOptions(c, group)), 2, l, nil))
		wait.Within(t, loadWait(30*time.Second, 4000), "every record after the restart", func() bool { return l.covers(ends) })
		wait.Within(t, 10*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
		stopPipeline(t, second)
		watch.check(t)
		// In flight at the stop at most: each partition's window, plus the
		// processors' queues and chunks shared by all partitions.
		bound := parts*po.Producer.Flow.WithDefaults().MaxWindow() + topo.Concurrency*(topo.QueueCapacity+topo.MaxDemand)
		d := l.duplicates()
		if d > bound {
			t.Fatalf("%d records handled twice after an abrupt stop; in flight at most %d", d, bound)
		}
		t.Logf("%d records handled twice after an abrupt stop (in flight at most %d)", d, bound)
	})
}

// Guarantee: broker faults injected at the broker (fetch errors, coordinator
// errors on commits and heartbeats, dropped fetch connections) are
// recovered from: every record is handled and committed, nothing is
// committed unhandled.
func TestBrokerFaultsRecovered(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 6
		group := "g-faults"
		c := newCluster(t, parts)
		l := newLedger()
		watch := watchCommits(c, group, l)
		ends := produce(t, c, parts, 0, records(2000))
		// Fetch errors on the topic, coordinator errors for the group.
		fetchFaults := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Err: kerr.NotLeaderForPartition, Count: 8})
		coordFaults := c.Fault(
			kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: group, TopLevel: false, Err: kerr.NotCoordinator, Count: 3},
			kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Group: group, TopLevel: true, Err: kerr.NotCoordinator, Count: 3},
		)
		defer fetchFaults.Remove()
		defer coordFaults.Remove()
		// Dropped connections: every 3rd fetch closes its connection, 5 times.
		var mu sync.Mutex
		fetches, drops := 0, 0
		c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			mu.Lock()
			defer mu.Unlock()
			fetches++
			if fetches%3 == 0 && drops < 5 {
				drops++
				return nil, errDropped, true
			}
			return nil, nil, false
		})
		slow := func(*message.Message[[]byte]) error { time.Sleep(100 * time.Microsecond); return nil }
		p := startPipeline(t, pipelineOpts("faults", cl.new(t, sourceOptions(c, group)), 2, l, slow))
		wait.Within(t, loadWait(40*time.Second, 2000), "every record despite faults", func() bool { return l.covers(ends) })
		wait.Within(t, 20*time.Second, "commits at the end despite faults", func() bool { return equalOffsets(committed(c, group), ends) })
		stopPipeline(t, p)
		watch.check(t)
		mu.Lock()
		defer mu.Unlock()
		if fetchFaults.Hits() == 0 || coordFaults.Hits() == 0 || drops == 0 {
			t.Fatalf("faults not exercised: fetch errors %d, coordinator errors %d, dropped connections %d",
				fetchFaults.Hits(), coordFaults.Hits(), drops)
		}
		t.Logf("fetch errors %d, coordinator errors %d, dropped connections %d, records handled twice %d",
			fetchFaults.Hits(), coordFaults.Hits(), drops, l.duplicates())
	})
}

type droppedError struct{}

func (droppedError) Error() string { return "connection dropped by the test" }

var errDropped = droppedError{}

// Guarantee: an ack from an older generation never moves a newer
// generation's offset. A message stuck past RevokeTimeout in generation 1 is
// acknowledged only after the partition was claimed again in generation 2;
// every commit of a generation covers only offsets handled in that
// generation (from where the generation started), checked at the broker.
func TestStaleAckDoesNotMoveNewerGeneration(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		group := "g-stale"
		c := newCluster(t, 1, kfake.SeedTopics(1, "other"))
		ends := produce(t, c, 1, 0, 100)

		var mu sync.Mutex
		handledIn := map[int32]map[int64]bool{} // generation -> offsets handled in it
		var violations []string
		c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			r := req.(*kmsg.OffsetCommitRequest)
			if r.Group != group {
				return nil, nil, false
			}
			mu.Lock()
			defer mu.Unlock()
			seen := handledIn[r.Generation]
			start := int64(-1)
			for o := range seen {
				if start < 0 || o < start {
					start = o
				}
			}
			for _, tp := range r.Topics {
				if tp.Topic != testTopic {
					continue
				}
				for _, pp := range tp.Partitions {
					for o := max(start, 0); start >= 0 && o < pp.Offset; o++ {
						if !seen[o] {
							violations = append(violations, fmt.Sprintf("generation %d committed %d but did not handle %d", r.Generation, pp.Offset, o))
							break
						}
					}
				}
			}
			return nil, nil, false
		})

		release := make(chan struct{})
		var releaseOnce sync.Once
		unblock := func() { releaseOnce.Do(func() { close(release) }) }
		defer unblock()
		var firstGen atomic.Int32
		firstGen.Store(-1)
		l := newLedger()
		opts := sourceOptions(c, group)
		opts.Unordered = true
		opts.RevokeTimeout = 300 * time.Millisecond
		po := pipelineOpts("a", cl.new(t, opts), 1, l, func(m *message.Message[[]byte]) error {
			md, _ := message.MetadataAs[*kafka.Metadata](m)
			firstGen.CompareAndSwap(-1, md.GenerationID)
			if md.GenerationID == firstGen.Load() {
				if md.Offset == 5 {
					<-release // stuck past the revoke; acknowledged in a later generation
				}
			} else {
				unblock()
				time.Sleep(5 * time.Millisecond) // the new generation goes slowly
			}
			mu.Lock()
			if handledIn[md.GenerationID] == nil {
				handledIn[md.GenerationID] = map[int64]bool{}
			}
			handledIn[md.GenerationID][md.Offset] = true
			mu.Unlock()
			return nil
		})
		po.Processors.Concurrency = 4
		po.Processors.MaxDemand = 1
		a := startPipeline(t, po)
		wait.Within(t, 10*time.Second, "generation 1 to handle all but offset 5", func() bool { return l.handled(rec{0, 99}) })
		wait.Within(t, 5*time.Second, "generation 1 to commit up to offset 5", func() bool { return committed(c, group)[0] == 5 })

		// Another member joins (on another topic): the eager rebalance revokes
		// the partition and gives it back to the first member, in generation 2.
		bo := sourceOptions(c, group)
		bo.Topics = []string{"other"}
		b := startPipeline(t, pipelineOpts("b", cl.new(t, bo), 1, newLedger(), nil))
		wait.Within(t, 20*time.Second, "commit at the end", func() bool { return equalOffsets(committed(c, group), ends) })
		stopPipeline(t, b)
		unblock()
		stopPipeline(t, a)
		mu.Lock()
		defer mu.Unlock()
		if len(handledIn) < 2 {
			t.Fatalf("the partition was not claimed again in a new generation (generations %v)", len(handledIn))
		}
		if len(violations) > 0 {
			t.Fatalf("%d commits covered offsets not handled in their generation; first: %s", len(violations), violations[0])
		}
	})
}

// Guarantee: a member whose pipeline drains leaves the group at the next
// rebalance instead of keeping partitions it will not consume, with the
// eager (range) and the cooperative-sticky strategies: while A's drain is
// held up by a handler, a member B that joins the group gets every
// partition and consumes what is produced to them, before A's Stop returns.
func TestDrainingMemberLeavesOnRebalance(t *testing.T) {
	eachStrategy(t, func(t *testing.T, cl client, strategy string) {
		drainThenRebalance(t, cl, strategy, "g-drain-leave-"+strategy, 4, nil,
			func(opts kafka.Options) (testSource, *ledger) {
				lb := newLedger()
				bsrc := cl.new(t, opts)
				b := startPipeline(t, pipelineOpts("b", bsrc, 1, lb, nil))
				t.Cleanup(func() { stopPipeline(t, b) })
				return bsrc, lb
			})
	})
}

// Guarantee: a member whose pipeline drains does not take the partitions a
// rebalance gives it but leaves the group, with the eager (range) and the
// cooperative-sticky strategies: while A's drain is held up by a handler, a
// member C leaves the group of A, B and C, and B, not A, ends up with every
// partition and consumes what is produced to them, before A's Stop returns.
func TestDrainingMemberLeavesWhenGivenPartitions(t *testing.T) {
	eachStrategy(t, func(t *testing.T, cl client, strategy string) {
		const parts = 6
		group := "g-drain-given-" + strategy
		var bsrc testSource
		lb := newLedger()
		var c2 *pipeline.Pipeline[[]byte, []byte]
		cLeft := false
		drainThenRebalance(t, cl, strategy, group, parts,
			func(c *kfake.Cluster, opts kafka.Options) {
				bsrc = cl.new(t, opts)
				b := startPipeline(t, pipelineOpts("b", bsrc, 1, lb, nil))
				t.Cleanup(func() { stopPipeline(t, b) })
				c2 = startPipeline(t, pipelineOpts("c", cl.new(t, opts), 1, newLedger(), nil))
				t.Cleanup(func() {
					if !cLeft {
						stopPipeline(t, c2)
					}
				})
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if _, err := c.WaitGroupInfo(ctx, group, func(gi *kfake.GroupInfo) bool {
					if gi == nil || len(gi.Members) != 3 || gi.NumAssigned() != parts {
						return false
					}
					for _, m := range gi.Members {
						if m.NumAssigned() == 0 {
							return false
						}
					}
					return true
				}); err != nil {
					t.Fatalf("the group did not settle on 3 members with partitions: %v", err)
				}
			},
			func(kafka.Options) (testSource, *ledger) {
				cLeft = true
				stopPipeline(t, c2) // C leaves: its partitions go to A and B
				return bsrc, lb
			})
	})
}

// drainThenRebalance checks that a member A whose pipeline drains leaves
// its group when the group rebalances. On a new cluster of parts
// partitions, A (pipeline "a") joins group with strategy, then others (when
// not nil) starts the group's other members with the same options, and
// parts*100 records are produced. A's handler holds up the first message
// at offset 5 it gets until the end of the test, so that A's drain lasts:
// A is stopped, and once its source has drained (its Run returned),
// rebalance changes the group's members and returns the source and the
// ledger of the member that must then consume the 100 records produced to
// each partition next, before A's Stop returns. A's Stop must then return
// without error once the held message is released.
func drainThenRebalance(t *testing.T, cl client, strategy, group string, parts int32,
	others func(c *kfake.Cluster, opts kafka.Options), rebalance func(opts kafka.Options) (testSource, *ledger)) {
	t.Helper()
	c := newCluster(t, parts)
	held := make(chan struct{})
	var holding atomic.Bool
	release := make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	defer unblock()
	opts := sourceOptions(c, group)
	opts.Rebalance = strategy
	aopts := opts
	aopts.RevokeTimeout = 500 * time.Millisecond // the held message is not waited for long
	po := pipelineOpts("a", cl.new(t, aopts), 1, newLedger(), func(m *message.Message[[]byte]) error {
		if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Offset == 5 && holding.CompareAndSwap(false, true) {
			close(held)
			<-release
		}
		return nil
	})
	po.ShutdownTimeout = time.Minute // A drains until the test releases its handler
	a := startPipeline(t, po)
	if others != nil {
		others(c, opts)
	}
	produce(t, c, parts, 0, int(parts)*100)
	wait.For(t, "A's handler to hold a message", func() bool {
		select {
		case <-held:
			return true
		default:
			return false
		}
	})

	stopped := make(chan struct{})
	var stopErr error
	go func() {
		defer close(stopped)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		stopErr = a.Stop(ctx)
	}()
	defer func() { unblock(); <-stopped }()
	wait.For(t, "A's source to drain (its Run returned)", func() bool {
		st := a.SourceStatus()
		return len(st) == 1 && st[0].State == producer.StateStopped
	})

	bsrc, lb := rebalance(opts)
	produce(t, c, parts, int(parts)*100, int(parts)*100) // offsets 100..199 of every partition
	missing := func() []int32 {
		var ps []int32
		for p := range parts {
			for o := int64(100); o < 200; o++ {
				if !lb.handled(rec{p, o}) {
					ps = append(ps, p)
					break
				}
			}
		}
		return ps
	}
	wait.Within(t, 20*time.Second, "B to consume the records produced to every partition while A drains",
		func() bool { return len(missing()) == 0 },
		func() string { return fmt.Sprintf("partitions B has not consumed: %v", missing()) },
		func() string { return fmt.Sprintf("B's stats: %+v", bsrc.Stats().Members) })
	select {
	case <-stopped:
		t.Fatalf("A's Stop returned (%v) before B consumed every partition: A was not draining", stopErr)
	default:
	}
	unblock()
	<-stopped
	if stopErr != nil {
		t.Fatalf("A's Stop: %v", stopErr)
	}
}
