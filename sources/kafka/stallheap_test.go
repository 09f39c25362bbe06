package kafka_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/testsize"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/pipeline"
)

// Guarantee: with every handler stalled and a backlog far larger than the
// pipeline may take (BOULEVARD_STALL_RECORDS records of 4 KiB, 6,000 by
// default: 23 MiB), the heap the running source adds stays within the
// bounds of its options, whatever the backlog. The bound: what the same
// source adds stalled on an empty topic (the clients' connections,
// goroutines, pools and metrics, measured first); per partition two
// permit windows (delivered and read ahead) and sarama's channel of half a
// window, the processor's queue and the message in the handler, at twice
// the record's size each (the value and what carries it); one fetch per
// partition and one per broker, of Fetch.Default or
// kgo.FetchMaxPartitionBytes bytes (no record batch is larger); and that
// idle cost again for what the running clients allocate around the
// collection (heartbeats, commits, metrics samples). Each heap is measured
// once nothing is fetched any more, from a baseline taken after the
// backlog was produced and its client closed. The records are
// uncompressed: a fetch's byte limits count compressed bytes (see
// docs/kafka.md). Once the handlers resume every record is handled and the
// pipeline stops.
func TestStalledHandlersKeepTheHeapWithinTheWindowsAndFetchesNotTheBacklog(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		n := testsize.Count(t, "BOULEVARD_STALL_RECORDS", 1500, 6000)
		stalledHeap(t, cl, stalled{parts: 2, records: n, size: 4 << 10, fetch: 32 << 10, window: 10})
	})
}

// Guarantee: a member far behind on many partitions (8, or
// BOULEVARD_LAG_PARTITIONS; 200 records of 16 KiB each, 3.1 MiB a
// partition), its handlers stalled, holds per partition what its windows
// hold and one fetch of the size its options give the client (64 KiB
// here: Fetch.Default and Fetch.Max with sarama, kgo.FetchMaxPartitionBytes
// and kgo.FetchMaxBytes with franz-go; BOULEVARD_LAG_FETCH sets another
// size), within the bound of
// TestStalledHandlersKeepTheHeapWithinTheWindowsAndFetchesNotTheBacklog,
// not the client's default fetch of 1 MiB a partition (docs/kafka.md,
// "Memory while behind").
func TestBackloggedPartitionsHoldOneFetchOfTheConfiguredSizeEach(t *testing.T) {
	parts := testsize.Count(t, "BOULEVARD_LAG_PARTITIONS", 8, 8)
	fetch := testsize.Count(t, "BOULEVARD_LAG_FETCH", 64<<10, 64<<10)
	eachClient(t, func(t *testing.T, cl client) {
		stalledHeap(t, cl, stalled{parts: int32(parts), records: 200 * parts, size: 16 << 10, fetch: fetch, window: 2})
	})
}

// stalled is the backlog and the options of stalledHeap.
type stalled struct {
	parts   int32
	records int // spread round-robin over the partitions
	size    int // of each record's value
	fetch   int // Fetch.Default and Fetch.Max, kgo.FetchMaxPartitionBytes and kgo.FetchMaxBytes
	window  int // producer.Flow.Initial
}

// stalledHeap produces s.records uncompressed records, runs a pipeline of
// cl's source over them with its handler stalled, fails the test when the
// heap grew by more than the bound the options set (see
// TestStalledHandlersKeepTheHeapWithinTheWindowsAndFetchesNotTheBacklog),
// then resumes the handler and waits for every record to be handled.
func stalledHeap(t *testing.T, cl client, s stalled) {
	const (
		brokers = 3 // newCluster's
		idle    = "idle"
	)
	perRec := 2 * s.size // the value and what carries it (message, metadata, client record)
	parts := s.parts
	c := newCluster(t, parts, kfake.SeedTopics(parts, idle))
	ends := map[int32]int64{}
	value := make([]byte, s.size)
	for from := 0; from < s.records; from += 1000 {
		recs := make([]*kgo.Record, 0, 1000)
		for i := from; i < min(s.records, from+1000); i++ {
			p := int32(i) % parts
			ends[p]++
			recs = append(recs, &kgo.Record{Topic: testTopic, Partition: p, Value: value})
		}
		produceSync(t, c, recs, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(int32(s.fetch)))
	}
	fetched := watchFetches(c)
	cl = cl.withKgo(kgo.FetchMaxPartitionBytes(int32(s.fetch)), kgo.FetchMaxBytes(int32(s.fetch)))

	// stall runs the pipeline over topic with its handler stalled until
	// its source has taken what it will and the clients stopped
	// fetching; it returns what the heap grew by, the pipeline's bound
	// on the records it holds, and the functions that resume the
	// handler and stop the pipeline.
	stall := func(topic, group string, l *ledger) (grown int64, held int, resume, stop func()) {
		before := wait.LiveHeap()
		opts := sourceOptions(c, group)
		opts.Topics = []string{topic}
		opts.Config.Consumer.Fetch.Default = int32(s.fetch)
		opts.Config.Consumer.Fetch.Max = int32(s.fetch)
		src := cl.new(t, opts)
		var p *pipeline.Pipeline[[]byte, []byte]
		p, resume = startStalled(t, "stall-heap", src, l, s.window)
		stop = sync.OnceFunc(func() {
			resume()
			stopPipeline(t, p)
		})
		t.Cleanup(stop)
		top := p.Topology()
		held = top.Processors.QueueCapacity + top.Processors.Concurrency + int(parts)*(2*s.window+s.window/2)
		wait.Within(t, 60*time.Second, "every partition claimed", func() bool {
			return len(src.Stats().Members) == 1 && len(src.Stats().Members[0].Partitions) == int(parts)
		})
		wait.Stable(t, 60*time.Second, 500*time.Millisecond, "the source and the client to stop fetching", func() string {
			next := []int64{}
			for _, m := range src.Stats().Members {
				for _, pt := range m.Partitions {
					next = append(next, pt.Next)
				}
			}
			return fmt.Sprint(next, fetched())
		})
		return wait.LiveHeap() - before, held, resume, stop
	}

	fixed, _, _, stopIdle := stall(idle, "g-stall-idle", newLedger())
	stopIdle()
	fixed = max(0, fixed)

	l := newLedger()
	grown, held, resume, stop := stall(testTopic, "g-stall-heap", l)
	bound := 2*fixed + int64(held*perRec+(int(parts)+brokers)*s.fetch)
	t.Logf("%s: %d partitions, %d records of %d bytes, window %d, fetch %d bytes; heap grew by %.1f MiB (%.0f KiB a partition), %.1f MiB idle (bound %.1f MiB, backlog %.1f MiB)",
		cl.name, parts, s.records, s.size, s.window, s.fetch, mib(grown), float64(grown-fixed)/1024/float64(parts), mib(fixed), mib(bound), mib(int64(s.records*s.size)))
	if grown > bound {
		t.Errorf("with the handlers stalled the heap grew by %d bytes over %d records of %d bytes on %d partitions; bound %d (%d idle)",
			grown, s.records, s.size, parts, bound, fixed)
	}

	resume()
	wait.Within(t, loadWait(60*time.Second, 6000)*time.Duration(max(1, s.records/6000)), "every record handled", func() bool { return l.covers(ends) })
	stop()
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
