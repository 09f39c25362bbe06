package kafka_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// openTxnRecords is how many records the transaction of txnLag writes.
const openTxnRecords = 2

// txnLag is a one-partition topic of plain records, a transactional
// producer of it and a sarama source reading it, for the source's lag
// around a transaction.
type txnLag struct {
	t       *testing.T
	c       *kfake.Cluster
	prod    *kgo.Client
	src     *kafka.Source
	listed  atomic.Int32 // end offset listings the cluster received
	held    chan struct{}
	release func()
}

// newTxnLag starts a one-broker cluster with plain records "v0", ... and
// a transactional producer, and prepares a sarama source of group over
// it, its options as sourceOptions and then as opts says; the plain
// records are written with produceOpts.
func newTxnLag(t *testing.T, group string, plain int, opts func(*kafka.Options), produceOpts ...kgo.Opt) *txnLag {
	t.Helper()
	c := newCluster(t, 1, kfake.NumBrokers(1))
	produce(t, c, 1, 0, plain, produceOpts...)
	x := &txnLag{t: t, c: c, held: make(chan struct{})}
	x.release = sync.OnceFunc(func() { close(x.held) })
	var err error
	x.prod, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("lag-producer"),
		kgo.DefaultProduceTopic(testTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.prod.Close)
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if endListing(req) {
			x.listed.Add(1)
		}
		return nil, nil, false
	})
	o := sourceOptions(c, group)
	opts(&o)
	x.src = newSource(t, o)
	return x
}

// endListing reports whether req is a ListOffsets request of end offsets
// (timestamp -1).
func endListing(req kmsg.Request) bool {
	return slices.ContainsFunc(req.(*kmsg.ListOffsetsRequest).Topics, func(rt kmsg.ListOffsetsRequestTopic) bool {
		return slices.ContainsFunc(rt.Partitions, func(rp kmsg.ListOffsetsRequestTopicPartition) bool { return rp.Timestamp == -1 })
	})
}

// openTxn begins a transaction and writes its openTxnRecords records
// ("t0", ...) to partition 0, leaving it open.
func (x *txnLag) openTxn() {
	x.t.Helper()
	if err := x.prod.BeginTransaction(); err != nil {
		x.t.Fatal(err)
	}
	for i := range openTxnRecords {
		r := &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "t%d", i)}
		if err := x.prod.ProduceSync(x.t.Context(), r).FirstErr(); err != nil {
			x.t.Fatal(err)
		}
	}
}

// commitTxn commits the transaction openTxn began.
func (x *txnLag) commitTxn() {
	x.t.Helper()
	if err := x.prod.EndTransaction(x.t.Context(), kgo.TryCommit); err != nil {
		x.t.Fatal(err)
	}
}

// start runs the source in a pipeline of one member whose handlers hold
// each record of the transaction until release is called (at cleanup at
// the latest).
func (x *txnLag) start() {
	x.t.Helper()
	po := pipelineOpts(x.t.Name(), x.src, 1, newLedger(), func(m *message.Message[[]byte]) error {
		if strings.HasPrefix(string(m.Data), "t") {
			<-x.held
		}
		return nil
	})
	p := startPipeline(x.t, po)
	x.t.Cleanup(func() { stopPipeline(x.t, p) })
	x.t.Cleanup(x.release) // before the stop
}

// stats returns the source's stats of the partition.
func (x *txnLag) stats() kafka.PartitionStats {
	if ms := x.src.Stats().Members; len(ms) == 1 && len(ms[0].Partitions) == 1 {
		return ms[0].Partitions[0]
	}
	return kafka.PartitionStats{Committed: -1}
}

// waitFor waits until cond holds of the stats and, when listings is
// set, the cluster received two more end offset listings since it first
// did: the first of them was answered and noted.
func (x *txnLag) waitFor(what string, listings bool, cond func(kafka.PartitionStats) bool) kafka.PartitionStats {
	x.t.Helper()
	var from int32 = -1
	wait.For(x.t, what, func() bool {
		if !cond(x.stats()) {
			return false
		}
		if !listings {
			return true
		}
		if from < 0 {
			from = x.listed.Load()
		}
		return x.listed.Load() >= from+2
	}, func() string { return fmt.Sprintf("stats %+v, %d end listings", x.stats(), x.listed.Load()) })
	return x.stats()
}

// noListing is a HighWaterInterval longer than any test: the source
// lists no end offset, and knows the partition's end from its fetches
// alone.
const noListing = time.Hour

// Guarantee: a read-committed sarama source caught up with a partition
// shows no lag while a transaction after its records is open: its
// high-water mark is the last stable offset it lists, not the fetched
// high-water mark, which counts the open transaction's records it
// cannot read; once the transaction commits, its records (and its
// marker) count until they are handled, the marker after (which the
// sarama source does not commit past).
func TestSaramaReadCommittedLagLeavesOutTheRecordsOfAnOpenTransaction(t *testing.T) {
	const plain = 5
	x := newTxnLag(t, "g-lag-committed", plain, func(o *kafka.Options) {
		o.Config.Consumer.IsolationLevel = sarama.ReadCommitted
		o.HighWaterInterval = 10 * time.Millisecond
	})
	x.openTxn() // the first fetch's high-water mark is past it
	x.start()
	st := x.waitFor("the plain records committed, and two end listings since", true, func(st kafka.PartitionStats) bool {
		return st.Committed == plain && st.Next == plain
	})
	if st.HighWater != plain || st.Lag != 0 || st.FetchLag != 0 {
		t.Fatalf("stats %+v with a transaction of %d records open after %d: want high water %d (the last stable offset), lag 0 and fetch lag 0",
			st, openTxnRecords, plain, plain)
	}
	x.commitTxn()
	end := int64(plain + openTxnRecords + 1) // past the commit marker
	x.waitFor("the committed transaction counted in the lag", false, func(st kafka.PartitionStats) bool {
		return st.Committed == plain && st.HighWater == end && st.Lag == end-plain
	})
	x.release()
	x.waitFor("the transaction handled", false, func(st kafka.PartitionStats) bool {
		return st.Committed == end-1 && st.HighWater == end && st.Lag == 1
	})
}

// Guarantee: a read-committed sarama source that lists no end offset
// counts its high-water mark to the offset after the last record it
// fetched, every record fetched under read-committed lying below the last
// stable offset, and not to the fetched high-water mark: caught up while a
// transaction is open, it shows no lag; once the transaction commits, its
// records count from their fetch until they are handled.
func TestSaramaReadCommittedLagCountsToTheRecordsFetched(t *testing.T) {
	const plain = 5
	x := newTxnLag(t, "g-lag-committed-fetched", plain, func(o *kafka.Options) {
		o.Config.Consumer.IsolationLevel = sarama.ReadCommitted
		o.HighWaterInterval = noListing
	})
	x.openTxn() // the first fetch's high-water mark is past it
	x.start()
	st := x.waitFor("the plain records committed", false, func(st kafka.PartitionStats) bool {
		return st.Committed == plain && st.Next == plain
	})
	if st.HighWater != plain || st.Lag != 0 {
		t.Fatalf("stats %+v with a transaction of %d records open after %d: want high water %d (after the last record fetched) and lag 0",
			st, openTxnRecords, plain, plain)
	}
	x.commitTxn()
	end := int64(plain + openTxnRecords)
	x.waitFor("the committed transaction's records fetched and counted in the lag", false, func(st kafka.PartitionStats) bool {
		return st.Committed == plain && st.Next == end && st.HighWater == end && st.Lag == openTxnRecords
	})
	x.release()
	x.waitFor("the transaction handled", false, func(st kafka.PartitionStats) bool {
		return st.Committed == end && st.HighWater == end && st.Lag == 0
	})
}

// Guarantee: a read-uncommitted sarama source counts the records of an
// open transaction in its lag from the high-water mark of its fetches,
// before it takes them in, until they are handled: it reads them. The
// source's handlers hold its first record, and its fetches, of a few
// small batches each, stop with its read-ahead full, long before the
// transaction's records.
func TestSaramaReadUncommittedLagCountsTheRecordsOfAnOpenTransaction(t *testing.T) {
	const plain = 2000
	x := newTxnLag(t, "g-lag-uncommitted", plain, func(o *kafka.Options) {
		o.HighWaterInterval = noListing
		o.Config.Consumer.Fetch.Default, o.Config.Consumer.Fetch.Max = 4096, 4096
	}, kgo.ProducerBatchMaxBytes(1024))
	x.openTxn()
	end := int64(plain + openTxnRecords)
	p, resume := startStalled(t, t.Name(), x.src, newLedger(), 5) // holds the first record
	t.Cleanup(func() { stopPipeline(t, p) })
	t.Cleanup(resume) // before the stop
	x.waitFor("the open transaction's records counted in the lag before they are taken in", false, func(st kafka.PartitionStats) bool {
		return st.Next < end && st.HighWater == end && st.Lag == end
	})
	resume()
	x.waitFor("the transaction handled", false, func(st kafka.PartitionStats) bool {
		return st.Committed == end && st.HighWater == end && st.Lag == 0
	})
}
