package franz

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
)

// txnLag is a one-partition topic of plain records, a transactional
// producer of it and a source reading it, for the source's lag around a
// transaction.
type txnLag struct {
	t       *testing.T
	prod    *kgo.Client
	src     *Source
	listed  atomic.Int32 // end offset listings the cluster received
	held    chan struct{}
	release func()
}

const (
	txnTopic       = "txn"
	plainRecords   = 5 // plain records before the transaction
	openTxnRecords = 2 // records of the transaction
)

// newTxnLag starts a cluster with plainRecords plain records and a
// transactional producer, and prepares a source of group over it,
// committing on acknowledgement and listing the end offsets every 10ms,
// with opts added to its client options.
func newTxnLag(t *testing.T, group string, opts ...kgo.Opt) *txnLag {
	t.Helper()
	c := groupCluster(t, txnTopic, plainRecords)
	x := &txnLag{t: t, held: make(chan struct{})}
	var once atomic.Bool
	x.release = func() {
		if once.CompareAndSwap(false, true) {
			close(x.held)
		}
	}
	var err error
	x.prod, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("open"), kgo.DefaultProduceTopic(txnTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.prod.Close)
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if endListing(req.(*kmsg.ListOffsetsRequest)) {
			x.listed.Add(1)
		}
		return nil, nil, false
	})
	x.src = groupSource(t, c, txnTopic, group, func(o *Options) {
		o.CommitMode, o.HighWaterInterval = CommitOnAck, 10*time.Millisecond
		o.ClientOptions = append(o.ClientOptions, opts...)
	})
	return x
}

// openTxn begins a transaction and writes its openTxnRecords records
// ("t0", ...), leaving it open.
func (x *txnLag) openTxn() {
	x.t.Helper()
	if err := x.prod.BeginTransaction(); err != nil {
		x.t.Fatal(err)
	}
	for i := range openTxnRecords {
		if err := x.prod.ProduceSync(x.t.Context(), &kgo.Record{Value: fmt.Appendf(nil, "t%d", i)}).FirstErr(); err != nil {
			x.t.Fatal(err)
		}
	}
}

// start runs the source in a pipeline whose handlers hold each record of
// the transaction until release is called (at cleanup at the latest).
func (x *txnLag) start() {
	runPipeline(x.t, "isolation-lag", x.src, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		if strings.HasPrefix(string(m.Data), "t") {
			<-x.held
		}
		return m.Data, nil
	})
	x.t.Cleanup(x.release) // before the pipeline stops
}

// stats returns the source's stats of the partition.
func (x *txnLag) stats() PartitionStats {
	if ms := x.src.Stats().Members; len(ms) == 1 && len(ms[0].Partitions) == 1 {
		return ms[0].Partitions[0]
	}
	return PartitionStats{Committed: -1}
}

// waitFor waits until cond holds of the stats and, since it first did,
// the cluster received two more end offset listings: the first of them
// was answered and noted.
func (x *txnLag) waitFor(what string, cond func(PartitionStats) bool) PartitionStats {
	x.t.Helper()
	var from int32 = -1
	wait.For(x.t, what+" and two end listings since", func() bool {
		if !cond(x.stats()) {
			return false
		}
		if from < 0 {
			from = x.listed.Load()
		}
		return x.listed.Load() >= from+2
	}, func() string { return fmt.Sprintf("stats %+v, %d listings", x.stats(), x.listed.Load()) })
	return x.stats()
}

// endListing reports whether req lists end offsets (timestamp -1).
func endListing(req *kmsg.ListOffsetsRequest) bool {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if p.Timestamp == -1 {
				return true
			}
		}
	}
	return false
}

// Guarantee: a read-committed source caught up with a partition shows no
// lag while a transaction after its records is open, from its fetches as
// from its listings of the end offsets, both ending at the last stable
// offset; once the transaction commits, its records (and its marker)
// count until they are handled.
func TestReadCommittedLagLeavesOutTheRecordsOfAnOpenTransaction(t *testing.T) {
	x := newTxnLag(t, "g-lag-committed", kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	x.openTxn() // the first fetch's high-water mark is past it
	x.start()
	st := x.waitFor("the plain records committed", func(st PartitionStats) bool { return st.Committed == plainRecords })
	if st.HighWater != plainRecords || st.Lag != 0 {
		t.Fatalf("stats %+v with a transaction of %d records open after %d: want high water %d (the last stable offset) and lag 0",
			st, openTxnRecords, plainRecords, plainRecords)
	}
	if err := x.prod.EndTransaction(t.Context(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	end := int64(plainRecords + openTxnRecords + 1) // past the commit marker
	x.waitFor("the committed transaction counted in the lag", func(st PartitionStats) bool {
		return st.Committed == plainRecords && st.HighWater == end && st.Lag == end-plainRecords
	})
	x.release()
	x.waitFor("the transaction handled", func(st PartitionStats) bool { return st.Committed == end && st.Lag == 0 })
}

// Guarantee: a read-uncommitted source counts the records of an open
// transaction in its lag until they are handled: it reads them, and its
// end is the high-water mark.
func TestReadUncommittedLagCountsTheRecordsOfAnOpenTransaction(t *testing.T) {
	x := newTxnLag(t, "g-lag-uncommitted")
	x.start()
	x.waitFor("the plain records committed", func(st PartitionStats) bool { return st.Committed == plainRecords })
	x.openTxn()
	end := int64(plainRecords + openTxnRecords)
	x.waitFor("the open transaction's records fetched", func(st PartitionStats) bool { return st.Next == end })
	if st := x.stats(); st.Committed != plainRecords || st.HighWater != end || st.Lag != openTxnRecords {
		t.Fatalf("stats %+v with a transaction of %d records open after %d: want committed %d, high water %d and lag %d",
			st, openTxnRecords, plainRecords, plainRecords, end, openTxnRecords)
	}
	x.release()
	x.waitFor("the transaction handled", func(st PartitionStats) bool { return st.Committed == end && st.Lag == 0 })
}
