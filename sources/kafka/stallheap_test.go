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
		const (
			parts   = 2
			size    = 4 << 10
			perRec  = 2 * size // the value and what carries it (message, metadata, client record)
			fetch   = 32 << 10 // Fetch.Default and Fetch.Max, kgo.FetchMaxPartitionBytes and kgo.FetchMaxBytes
			window  = 10
			brokers = 3 // newCluster's
			idle    = "idle"
		)
		n := testsize.Count(t, "BOULEVARD_STALL_RECORDS", 1500, 6000)
		c := newCluster(t, parts, kfake.SeedTopics(parts, idle))
		ends := map[int32]int64{}
		value := make([]byte, size)
		for from := 0; from < n; from += 1000 {
			recs := make([]*kgo.Record, 0, 1000)
			for i := from; i < min(n, from+1000); i++ {
				p := int32(i % parts)
				ends[p]++
				recs = append(recs, &kgo.Record{Topic: testTopic, Partition: p, Value: value})
			}
			produceSync(t, c, recs, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(fetch))
		}
		fetched := watchFetches(c)
		cl = cl.withKgo(kgo.FetchMaxPartitionBytes(fetch), kgo.FetchMaxBytes(fetch))

		// stall runs the pipeline over topic with its handler stalled until
		// its source has taken what it will and the clients stopped
		// fetching; it returns what the heap grew by, the pipeline's bound
		// on the records it holds, and the functions that resume the
		// handler and stop the pipeline.
		stall := func(topic, group string, l *ledger) (grown int64, held int, resume, stop func()) {
			before := wait.LiveHeap()
			opts := sourceOptions(c, group)
			opts.Topics = []string{topic}
			opts.Config.Consumer.Fetch.Default = fetch
			opts.Config.Consumer.Fetch.Max = fetch
			src := cl.new(t, opts)
			var p *pipeline.Pipeline[[]byte, []byte]
			p, resume = startStalled(t, "stall-heap", src, l, window)
			stop = sync.OnceFunc(func() {
				resume()
				stopPipeline(t, p)
			})
			t.Cleanup(stop)
			top := p.Topology()
			held = top.Processors.QueueCapacity + top.Processors.Concurrency + parts*(2*window+window/2)
			wait.Within(t, 30*time.Second, "both partitions claimed", func() bool {
				return len(src.Stats().Members) == 1 && len(src.Stats().Members[0].Partitions) == parts
			})
			wait.Stable(t, 30*time.Second, 500*time.Millisecond, "the source and the client to stop fetching", func() string {
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
		bound := 2*fixed + int64(held*perRec+(parts+brokers)*fetch)
		t.Logf("%s: %d records of %d bytes; fetch positions %v; heap grew by %.1f MiB, %.1f MiB idle (bound %.1f MiB, backlog %.1f MiB)",
			cl.name, n, size, fetched(), mib(grown), mib(fixed), mib(bound), mib(int64(n*size)))
		if grown > bound {
			t.Errorf("with the handlers stalled the heap grew by %d bytes over %d records of %d bytes; bound %d (%d idle)", grown, n, size, bound, fixed)
		}

		resume()
		wait.Within(t, loadWait(60*time.Second, 6000)*time.Duration(max(1, n/6000)), "every record handled", func() bool { return l.covers(ends) })
		stop()
	})
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
