package kafka_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// txnStep is one write of writeTxns: n records with values v<from>… in a
// transaction that is committed or aborted, or outside any transaction.
type txnStep struct {
	from, n int
	txn     bool
	abort   bool
}

// writeTxns writes steps, in order, to partition 0 of the test topic with
// one transactional producer. Each transaction's end takes an offset of
// its own (its commit or abort marker), which no consumer sees as a
// record.
func writeTxns(t *testing.T, c *kfake.Cluster, steps ...txnStep) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.TransactionalID("gaps-producer"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, s := range steps {
		recs := make([]*kgo.Record, s.n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: testTopic, Partition: 0, Value: []byte("v" + strconv.Itoa(s.from+i))}
		}
		if !s.txn {
			produceSync(t, c, recs)
			continue
		}
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		end := kgo.TryCommit
		if s.abort {
			end = kgo.TryAbort
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
}

// readCommitted returns cl with its consumers reading committed records
// only: sarama's Config.Consumer.IsolationLevel, franz-go's
// kgo.FetchIsolationLevel in ClientOptions.
func readCommitted(cl client, o *kafka.Options) client {
	o.Config.Consumer.IsolationLevel = sarama.ReadCommitted
	return cl.withKgo(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
}

// runUntilCommitted runs a pipeline of one member on a source of group
// until the group's commit on partition 0 reaches end, and returns the
// values its handlers saw, in order, and the source's figures for the
// partition once it shows the commit.
func runUntilCommitted(t *testing.T, cl client, o kafka.Options, group string, c *kfake.Cluster, end int64) ([]string, kafka.PartitionStats) {
	t.Helper()
	return runUntilCommittedOn(t, cl, o, group, c, testTopic, end, nil)
}

// runUntilCommittedOn is runUntilCommitted on partition 0 of topic, the
// figures returned once they also satisfy shown, when set.
func runUntilCommittedOn(t *testing.T, cl client, o kafka.Options, group string, c *kfake.Cluster, topic string, end int64, shown func(kafka.PartitionStats) bool) ([]string, kafka.PartitionStats) {
	t.Helper()
	committed := func(c *kfake.Cluster, group string) map[int32]int64 { return committedOn(c, group, topic) }
	l := newLedger()
	var seen []string
	src := cl.new(t, o)
	po := pipelineOpts(group, src, 1, l, nil)
	po.Processors.Concurrency = 1
	handle := po.Processors.Handle
	values := make(chan string, 64)
	po.Processors.Handle = func(ctx context.Context, m *message.Message[[]byte]) ([]byte, error) {
		out, err := handle(ctx, m)
		values <- string(m.Data)
		return out, err
	}
	p := startPipeline(t, po)
	collect := func() {
		for {
			select {
			case v := <-values:
				seen = append(seen, v)
			default:
				return
			}
		}
	}
	wait.Within(t, 20*time.Second, fmt.Sprintf("the commit at %d", end), func() bool {
		collect()
		return committed(c, group)[0] >= end
	}, func() string { return fmt.Sprintf("committed %v, handled %v", committed(c, group), seen) })
	var stats kafka.PartitionStats
	wait.Within(t, 10*time.Second, "the stats of the commit", func() bool {
		for _, m := range src.Stats().Members {
			for _, ps := range m.Partitions {
				if ps.Committed >= end && ps.HighWater > 0 && (shown == nil || shown(ps)) {
					stats = ps
					return true
				}
			}
		}
		return false
	})
	stopPipeline(t, p)
	collect()
	if got := committed(c, group)[0]; got != end {
		t.Fatalf("committed %d, want %d: one past the last record handled", got, end)
	}
	if d := l.duplicates(); d != 0 {
		t.Fatalf("%d records handled twice: %v", d, seen)
	}
	return seen, stats
}

// pastMarker is end, one past the last record handled of a partition
// whose last write is a transaction marker, for cl's commit: the franz-go
// source commits past the marker too (it is at end), the sarama source,
// which never sees it, does not.
func pastMarker(cl client, end int64) int64 {
	if cl.name == franzClient.name {
		return end + 1
	}
	return end
}

// txnCluster starts a one-broker cluster whose test topic has one
// partition and writes steps to it.
func txnCluster(t *testing.T, steps ...txnStep) *kfake.Cluster {
	t.Helper()
	c := newCluster(t, 1, kfake.NumBrokers(1))
	writeTxns(t, c, steps...)
	return c
}

func vals(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "v" + strconv.Itoa(from+i)
	}
	return out
}

// Guarantee: with read_committed isolation (sarama's
// Config.Consumer.IsolationLevel, franz-go's kgo.FetchIsolationLevel in
// ClientOptions) the records of aborted transactions are never delivered,
// the committed ones are delivered once each and in order, the group's
// commit moves past the transaction markers and aborted records in
// between to one past the last record handled (past a trailing marker
// too with franz-go; with sarama, which never sees it, the marker stays
// uncommitted: the lag is 1 once the partition's last stable offset is
// listed), and a new member resumes there: it hands out only what was
// written since, with no record skipped or repeated.
func TestReadCommittedDeliversOnlyCommittedTransactionsAndResumesPastTheGaps(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		// Offsets: 0-2 committed, 3 marker, 4-5 aborted, 6 marker, 7-8
		// outside a transaction, 9-10 committed, 11 marker (end 12).
		c := txnCluster(t,
			txnStep{from: 0, n: 3, txn: true},
			txnStep{from: 3, n: 2, txn: true, abort: true},
			txnStep{from: 5, n: 2},
			txnStep{from: 7, n: 2, txn: true},
		)
		const group = "g-committed"
		o := sourceOptions(c, group)
		o.HighWaterInterval = 10 * time.Millisecond
		cl = readCommitted(cl, &o)
		got, ps := runUntilCommittedOn(t, cl, o, group, c, testTopic, pastMarker(cl, 11),
			func(ps kafka.PartitionStats) bool { return ps.HighWater == 12 })
		if want := slices.Concat(vals(0, 3), vals(5, 2), vals(7, 2)); !slices.Equal(got, want) {
			t.Fatalf("handled %v, want %v: the committed records once each, in order, none of the aborted ones", got, want)
		}
		if want := 12 - pastMarker(cl, 11); ps.Lag != want {
			t.Fatalf("lag %d after every record was handled, want %d: the trailing commit marker, committed past by franz-go only", ps.Lag, want)
		}

		// Offsets: 12-13 aborted, 14 marker, 15 committed, 16 marker.
		writeTxns(t, c,
			txnStep{from: 9, n: 2, txn: true, abort: true},
			txnStep{from: 11, n: 1, txn: true},
		)
		o = sourceOptions(c, group)
		cl = readCommitted(cl, &o)
		got, _ = runUntilCommitted(t, cl, o, group, c, pastMarker(cl, 16))
		if want := vals(11, 1); !slices.Equal(got, want) {
			t.Fatalf("a new member handled %v, want %v: only the records committed since the last commit", got, want)
		}
	})
}

// Guarantee: with the default read_uncommitted isolation, both clients
// deliver every data record, the aborted transactions' included, once each
// and in order, and never a transaction marker; the commit reaches one
// past the last record (past the trailing marker with franz-go).
func TestReadUncommittedDeliversAbortedRecordsButNoMarkers(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		// Offsets: 0-1 committed, 2 marker, 3-4 aborted, 5 marker, 6
		// committed, 7 marker.
		c := txnCluster(t,
			txnStep{from: 0, n: 2, txn: true},
			txnStep{from: 2, n: 2, txn: true, abort: true},
			txnStep{from: 4, n: 1, txn: true},
		)
		const group = "g-uncommitted"
		got, _ := runUntilCommitted(t, cl, sourceOptions(c, group), group, c, pastMarker(cl, 7))
		if want := vals(0, 5); !slices.Equal(got, want) {
			t.Fatalf("handled %v, want %v: every data record, aborted ones included, and no marker", got, want)
		}
	})
}

// Guarantee: records that compaction removed leave offsets without a
// record; both sources deliver the records that remain, once each and in
// order, and commit past the gaps to one past the last record.
func TestCompactedPartitionCommitsPastTheRemovedRecords(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const group, topic = "g-compacted", "compacted"
		c := newCluster(t, 1, kfake.NumBrokers(1))
		if err := c.CreateTopic(topic, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
		// Offsets 0-4, keys a a b b c: compaction keeps 1, 3 and 4.
		for i, k := range []string{"a", "a", "b", "b", "c"} {
			produceSync(t, c, []*kgo.Record{{Topic: topic, Key: []byte(k), Value: []byte("v" + strconv.Itoa(i))}})
		}
		c.Compact()
		o := sourceOptions(c, group)
		o.Topics = []string{topic}
		got, _ := runUntilCommittedOn(t, cl, o, group, c, topic, 5, nil)
		if want := []string{"v1", "v3", "v4"}; !slices.Equal(got, want) {
			t.Fatalf("handled %v, want %v: the records compaction kept, once each, in order", got, want)
		}
	})
}

// Guarantee: the franz-go source steps over a transaction's commit or
// abort marker that is a partition's last write, as over one between
// records, without delivering it: once every record is handled, under
// read_committed and read_uncommitted, and whether or not ClientOptions
// set kgo.KeepControlRecords, the group's commit reaches the high-water
// mark, Lag and FetchLag read 0, and each record the isolation level
// shows was handled once, in order.
func TestFranzCommitReachesTheHighWaterMarkPastATrailingTransactionMarker(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []txnStep
		// committed and uncommitted are the values handled under each
		// isolation level.
		committed, uncommitted []string
	}{
		// Offsets: 0 outside a transaction, 1-2 committed, 3 marker.
		{"commit", []txnStep{{from: 0, n: 1}, {from: 1, n: 2, txn: true}}, vals(0, 3), vals(0, 3)},
		// Offsets: 0-1 committed, 2 marker, 3-4 aborted, 5 marker.
		{"abort", []txnStep{{from: 0, n: 2, txn: true}, {from: 2, n: 2, txn: true, abort: true}}, vals(0, 2), vals(0, 4)},
	} {
		for _, iso := range []string{"read_committed", "read_uncommitted", "read_uncommitted_keep_control"} {
			t.Run(tc.name+"/"+iso, func(t *testing.T) {
				c := txnCluster(t, tc.steps...)
				end := int64(0)
				for _, s := range tc.steps {
					end += int64(s.n)
					if s.txn {
						end++ // the marker
					}
				}
				group := "g-marker-" + tc.name + "-" + iso
				o := sourceOptions(c, group)
				cl, want := franzClient, tc.uncommitted
				switch iso {
				case "read_committed":
					cl, want = readCommitted(cl, &o), tc.committed
				case "read_uncommitted_keep_control":
					cl = cl.withKgo(kgo.KeepControlRecords())
				}
				got, ps := runUntilCommitted(t, cl, o, group, c, end)
				if !slices.Equal(got, want) {
					t.Fatalf("handled %v, want %v: each record once, in order, and no marker", got, want)
				}
				if ps.HighWater != end || ps.Committed != end || ps.Lag != 0 || ps.FetchLag != 0 {
					t.Fatalf("high-water mark %d, committed %d, lag %d, fetch lag %d once every record was handled; want %d, %d, 0, 0",
						ps.HighWater, ps.Committed, ps.Lag, ps.FetchLag, end, end)
				}
			})
		}
	}
}
