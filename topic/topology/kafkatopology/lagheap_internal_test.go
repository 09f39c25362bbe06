package kafkatopology

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/testsize"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a group reader far behind on many partitions (8, or
// BOULEVARD_LAG_PARTITIONS; 200 letters of 16 KiB each, 3.1 MiB a
// partition) that is not received from holds its ReadAhead letters, the
// records its channels share, and per partition one fetch of
// Config.Consumer.Fetch.Default bytes (64 KiB here, BOULEVARD_LAG_FETCH
// to set another size; 1 MiB by default):
// the heap it adds stays within lagFetchHeld fetches a partition (the
// fetch sarama decoded and hands over, and the response that carried
// it), twice the letters' size for what ReadAhead allows (the letter and
// its record), and lagIdle, not the backlog (docs/kafka.md, "Memory while
// behind").
func TestBackloggedReaderHoldsOneFetchOfTheConfiguredSizeAPartition(t *testing.T) {
	const (
		perPart   = 200
		size      = 16 << 10
		readAhead = 16
	)
	parts := int32(testsize.Count(t, "BOULEVARD_LAG_PARTITIONS", 8, 8))
	fetch := int32(testsize.Count(t, "BOULEVARD_LAG_FETCH", 64<<10, 64<<10))
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs(), func(o *Options[msg]) {
		o.Partitions, o.ReadAhead = parts, readAhead
		o.Config.Consumer.Fetch.Default = fetch
		o.Config.Consumer.Fetch.Max = fetch
	})
	q := declare(t, b, topology.New("behind"))
	value, err := json.Marshal(msg{Key: strings.Repeat("k", size), N: 1})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(fetch))
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]*kgo.Record, 0, int(parts)*perPart)
	for i := range int(parts) * perPart {
		recs = append(recs, &kgo.Record{Topic: q.(*queues[msg]).main, Partition: int32(i) % parts, Value: value})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if err := pr.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	recs = nil

	// next holds, per partition, one past the highest offset fetched
	// (0 before its first fetch); kfake runs its control functions one
	// at a time.
	next := make([]atomic.Int64, parts)
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			for _, pp := range tp.Partitions {
				if n := &next[pp.Partition%parts]; pp.FetchOffset+1 > n.Load() {
					n.Store(pp.FetchOffset + 1)
				}
			}
		}
		return nil, nil, false
	})
	positions := func() (ps []int64) {
		for i := range next {
			ps = append(ps, next[i].Load())
		}
		return ps
	}
	before := wait.LiveHeap()
	subscribe(t, q)
	wait.Within(t, 60*time.Second, "every partition claimed and fetched", func() bool {
		return !slices.Contains(positions(), 0)
	})
	wait.Stable(t, 60*time.Second, 500*time.Millisecond, "the reader to stop fetching", func() string {
		return fmt.Sprint(positions())
	})
	grown := wait.LiveHeap() - before
	held := readAhead + max(readAhead, int(parts))
	bound := lagIdle + int64(parts)*lagFetchHeld*int64(fetch) + int64(held*2*size)
	t.Logf("%d partitions, %d letters of %d bytes, ReadAhead %d, Fetch.Default %d: heap grew by %.1f MiB (%.0f KiB a partition; bound %.1f MiB, backlog %.1f MiB)",
		parts, int(parts)*perPart, size, readAhead, fetch, float64(grown)/(1<<20), float64(grown)/1024/float64(parts),
		float64(bound)/(1<<20), float64(int(parts)*perPart*size)/(1<<20))
	if grown > bound {
		t.Errorf("a reader behind by %d letters of %d bytes on %d partitions grew the heap by %d bytes; bound %d", int(parts)*perPart, size, parts, grown, bound)
	}
}

// lagIdle and lagFetchHeld size the bound of
// TestBackloggedReaderHoldsOneFetchOfTheConfiguredSizeAPartition.
const (
	lagIdle      = 2 << 20
	lagFetchHeld = 3
)
