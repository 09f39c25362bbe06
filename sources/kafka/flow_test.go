package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// produceOneByOne writes n records per partition, each in its own record
// batch, so that a fetch with a tiny byte limit returns one record.
func produceOneByOne(t *testing.T, addrs []string, parts int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for i := range n {
		for p := range parts {
			r := &kgo.Record{Topic: testTopic, Partition: p, Value: []byte(strconv.Itoa(i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Guarantee: the permit window bounds what each partition fetches ahead of
// the processors: with the handler stuck, the fetch position the consumer
// asks the broker for stops within window + sarama's buffer + the
// processors' queue, far below the backlog, and it resumes once handling
// goes on.
func TestPermitWindowBoundsFetching(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 2
		backlog := records(300)
		c := newCluster(t, parts)
		produceOneByOne(t, c.ListenAddrs(), parts, backlog)

		fetched := watchFetches(c) // highest fetch offset asked for, per partition

		opts := sourceOptions(c, "g-window")
		opts.Config.Consumer.Fetch.Default = 1 // one record batch per fetch
		src := cl.new(t, opts)
		l := newLedger()
		const window = 10
		p, resume := startStalled(t, "window", src, l, window)
		defer func() {
			resume()
			stopPipeline(t, p)
		}()

		// The processor's queue + the message in the handler, then per
		// partition the window (delivered), the source's read-ahead (one
		// window), sarama's channel (window/2) and one fetch response in
		// flight.
		bound := int64(p.Topology().Processors.QueueCapacity + 1 + 2*window + window/2 + 2)
		// The claim must fetch at least its window (delivered) and its
		// read-ahead (another window) of each partition; then wait until the
		// fetch positions stop moving: the consumer fetched as far as it is
		// allowed.
		wait.Within(t, 10*time.Second, "fetching a window and a read-ahead of each partition", func() bool {
			f := fetched()
			return len(f) == parts && f[0] >= 2*window && f[1] >= 2*window
		})
		wait.Stable(t, 10*time.Second, 5*100*time.Millisecond, "the fetch positions to stop moving", func() string {
			return fmt.Sprint(fetched())
		})
		positions := fetched()
		t.Logf("fetch positions with the handler stuck: %v (bound %d, backlog %d per partition)", positions, bound, backlog)
		for part, off := range positions {
			if off > bound {
				t.Errorf("partition %d fetched up to offset %d with the handler stuck; bound %d (backlog %d)", part, off, bound, backlog)
			}
		}
		if cl.name == "franz" {
			// The franz-go claim reads ahead at most one window plus one
			// poll's records (one batch of one record here) and one fetch
			// buffered: over the partitions, the processor's queue and the
			// message in the handler, then per partition the window
			// (delivered), the read-ahead and those two records.
			total, sum := int64(p.Topology().Processors.QueueCapacity+1+parts*(2*window+2)), int64(0)
			for _, off := range positions {
				sum += off
			}
			if sum > total {
				t.Errorf("the partitions fetched %d records in all with the handler stuck; bound %d", sum, total)
			}
		}
		resume()
		ends := map[int32]int64{0: int64(backlog), 1: int64(backlog)}
		wait.Within(t, loadWait(30*time.Second, 300), "the backlog after the handler resumed", func() bool { return l.covers(ends) })
	})
}

// Guarantee: by default a partition's messages are handled in offset order,
// even with many processors.
func TestPartitionOrder(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 4
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, records(2000))
		l := newLedger()
		src := cl.new(t, sourceOptions(c, "g-order"))
		po := pipelineOpts("order", src, 2, l, func(m *message.Message[[]byte]) error {
			if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Offset%7 == 0 {
				time.Sleep(100 * time.Microsecond) // uneven handling times
			}
			return nil
		})
		po.Processors.Concurrency = 8
		p := startPipeline(t, po)
		wait.Within(t, loadWait(30*time.Second, 2000), "every record", func() bool { return l.covers(ends) })
		stopPipeline(t, p)
		l.mu.Lock()
		defer l.mu.Unlock()
		for part, offs := range l.order {
			for i := 1; i < len(offs); i++ {
				if offs[i] <= offs[i-1] {
					t.Fatalf("partition %d handled offset %d after %d", part, offs[i], offs[i-1])
				}
			}
		}
	})
}

// Guarantee: with acks arriving out of order (unordered processors, one slow
// message), the committed offset stops at the first unhandled message and
// moves to the end once it is handled.
func TestOutOfOrderAcksCommitPrefix(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 1
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, 200)
		l := newLedger()
		opts := sourceOptions(c, "g-prefix")
		opts.Unordered = true
		src := cl.new(t, opts)
		release := make(chan struct{})
		const slow = 37
		// Every commit made while the slow record is unhandled must stop at it.
		var passed atomic.Int64
		c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if r := req.(*kmsg.OffsetCommitRequest); r.Group == "g-prefix" && !l.handled(rec{0, slow}) {
				for _, tp := range r.Topics {
					for _, pp := range tp.Partitions {
						if pp.Offset > slow {
							passed.Store(pp.Offset)
						}
					}
				}
			}
			return nil, nil, false
		})
		po := pipelineOpts("prefix", src, 1, l, func(m *message.Message[[]byte]) error {
			if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Offset == slow {
				<-release
			}
			return nil
		})
		po.Processors.Concurrency = 4
		po.Processors.MaxDemand = 1 // a chunk's acks travel together: one message per chunk
		p := startPipeline(t, po)
		defer stopPipeline(t, p)
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		defer unblock() // runs before the stop, even when the test fails
		// Everything but the slow record gets handled (the window lets the
		// other processors run ahead of it) …
		wait.Within(t, 10*time.Second, "records after the slow one", func() bool { return l.handled(rec{0, 120}) })
		wait.Within(t, 10*time.Second, "the commit to reach the slow record", func() bool { return committed(c, "g-prefix")[0] == slow })
		if got := passed.Load(); got != 0 {
			t.Fatalf("committed %d while offset %d is in flight; want %d", got, slow, slow)
		}
		// … and once it is handled the commit reaches the end.
		unblock()
		wait.Within(t, 10*time.Second, "commit at the end", func() bool { return equalOffsets(committed(c, "g-prefix"), ends) })
		if got := passed.Load(); got != 0 {
			t.Fatalf("committed %d while offset %d was in flight; want %d", got, slow, slow)
		}
	})
}

// Guarantee: with FailureCommit (the default), a failed message is committed
// past after the failure hook ran, so it never stalls the partition and is
// not delivered again.
func TestFailureCommitPolicy(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 3
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, 300)
		l := newLedger()
		watch := watchCommits(c, "g-fail-commit", l)
		src := cl.new(t, sourceOptions(c, "g-fail-commit"))
		var hookMu sync.Mutex
		hooked := map[rec]int{}
		po := pipelineOpts("fail-commit", src, 1, l, func(m *message.Message[[]byte]) error {
			md, _ := message.MetadataAs[*kafka.Metadata](m)
			if md.Offset%10 == 3 {
				l.add(md) // handled, unsuccessfully
				return errors.New("poison")
			}
			return nil
		})
		po.Processors.HandleFailed = func(_ context.Context, failed []*message.Message[[]byte]) {
			hookMu.Lock()
			defer hookMu.Unlock()
			for _, m := range failed {
				md, _ := message.MetadataAs[*kafka.Metadata](m)
				hooked[rec{md.Partition, md.Offset}]++
			}
		}
		p := startPipeline(t, po)
		wait.Within(t, 20*time.Second, "commits at the end despite failures", func() bool { return equalOffsets(committed(c, "g-fail-commit"), ends) })
		stopPipeline(t, p)
		if d := l.duplicates(); d != 0 {
			t.Fatalf("%d redeliveries under the commit policy", d)
		}
		hookMu.Lock()
		if len(hooked) != 30 {
			t.Fatalf("failure hook saw %d messages, want 30", len(hooked))
		}
		hookMu.Unlock()
		watch.check(t)
	})
}

// Guarantee: with FailureRedeliver the partition does not commit past a
// failed message; it is fetched and handled again after the backoff (with
// the messages after it), until it succeeds; a DispositionDiscard set by the
// failure hook overrides the policy and commits past its message.
func TestFailureRedeliverPolicy(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 2
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, 200)
		l := newLedger()
		watch := watchCommits(c, "g-fail-redeliver", l)
		opts := sourceOptions(c, "g-fail-redeliver")
		opts.FailurePolicy = kafka.FailureRedeliver
		src := cl.new(t, opts)
		var mu sync.Mutex
		attempts := map[rec]int{}
		// flaky (partition 0) fails twice; poison (partition 1) always fails.
		flaky, poison := rec{0, 42}, rec{1, 77}
		po := pipelineOpts("fail-redeliver", src, 1, l, func(m *message.Message[[]byte]) error {
			md, _ := message.MetadataAs[*kafka.Metadata](m)
			if r := (rec{md.Partition, md.Offset}); r != flaky && r != poison {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			r := rec{md.Partition, md.Offset}
			attempts[r]++
			if r == poison || attempts[r] <= 2 {
				return errors.New("not yet")
			}
			return nil
		})
		po.Processors.HandleFailed = func(_ context.Context, failed []*message.Message[[]byte]) {
			for _, m := range failed {
				md, _ := message.MetadataAs[*kafka.Metadata](m)
				mu.Lock()
				n := attempts[rec{md.Partition, md.Offset}]
				mu.Unlock()
				if (rec{md.Partition, md.Offset}) == poison && n >= 2 {
					l.add(md) // given up on: handled, unsuccessfully
					m.SetDisposition(acker.DispositionDiscard)
				}
			}
		}
		p := startPipeline(t, po)
		wait.Within(t, 20*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, "g-fail-redeliver"), ends) })
		stopPipeline(t, p)
		mu.Lock()
		defer mu.Unlock()
		if got := attempts[flaky]; got != 3 {
			t.Fatalf("flaky record attempted %d times, want 3", got)
		}
		if got := attempts[poison]; got != 2 {
			t.Fatalf("poison record attempted %d times, want 2 (then discarded by the hook)", got)
		}
		if !l.covers(ends) {
			t.Fatal("records lost")
		}
		watch.check(t)
	})
}

// keep the imports used by helpers in other files referenced here.
var _ = pipeline.ErrShutdownTimeout
var _ = processor.DefaultMaxDemand
