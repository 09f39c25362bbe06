package claim

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/benchsrc"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// benchRecord stands for a client's record: what a reader's queue holds.
type benchRecord struct {
	offset int64
	key    []byte
	value  []byte
	ts     time.Time
}

func benchGet(r *benchRecord) Record {
	return Record{Offset: r.offset, Key: r.key, Value: r.value, Timestamp: r.ts}
}

func benchHeaders(dst []Header, _ *benchRecord) []Header { return dst }

// claimsSource runs one reader per claim, as the Kafka sources do: each
// takes its claim's permits and delivers the next records of its
// partition, until every partition has delivered its share.
type claimsSource struct {
	producer.Basic
	claims []*Claim
	counts []int // records each partition delivers
	start  <-chan struct{}
}

func (s *claimsSource) Info() (producer.Info, error) { return producer.Info{Ordered: true}, nil }

func (s *claimsSource) Run(ctx context.Context, stage *producer.Stage[[]byte]) error {
	for _, c := range s.claims {
		c.Open(stage)
	}
	select {
	case <-s.start:
	case <-ctx.Done():
		return nil
	}
	var wg sync.WaitGroup
	for i, c := range s.claims {
		wg.Go(func() {
			// The client's records: a ring of two windows, each record
			// written just before it is delivered, as a client decodes
			// a fetch into records the source takes soon after.
			ring := make([]*benchRecord, 1024)
			for j := range ring {
				ring[j] = &benchRecord{value: make([]byte, 100), ts: time.Now()}
			}
			recs := make([]*benchRecord, 0, 512)
			for next, end := 0, s.counts[i]; next < end; {
				n := c.Take(min(512, end-next))
				if n == 0 {
					select {
					case <-c.GrantCh:
						continue
					case <-ctx.Done():
						return
					}
				}
				recs = recs[:0]
				for j := range n {
					r := ring[(next+j)%len(ring)]
					r.offset = int64(next + j)
					recs = append(recs, r)
				}
				Deliver(c, recs, benchGet, benchHeaders)
				next += n
			}
		})
	}
	wg.Wait()
	return nil
}

// BenchmarkClaimDelivery measures the claims' path without a client: six
// partitions read by a goroutine each, window 512, per-partition order,
// two processors whose handler counts the record, each chunk's outcomes
// acknowledged to the claims (which advance their handled prefix and
// recycle the slots). ns/op and cpu-ns/op (the process's CPU time) are
// per record.
func BenchmarkClaimDelivery(b *testing.B) {
	const parts = 6
	var handled atomic.Int64
	start := make(chan struct{})
	src := &claimsSource{start: start}
	for i := range parts {
		n := b.N / parts
		if i < b.N%parts {
			n++
		}
		src.claims = append(src.claims, New(Config{Topic: "bench", Partition: int32(i), Window: 512, Committed: 0, Start: 0,
			OnAdvance: func(int64) {}}))
		src.counts = append(src.counts, n)
	}
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:   "bench",
		Logger: discard,
		Producer: producer.Options[[]byte]{
			Source: src,
			Flow:   producer.Flow{Initial: 512},
		},
		Processors: processor.Options[[]byte, []byte]{Concurrency: 2,
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				handled.Add(1)
				return m.Data, nil
			}},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchsrc.ReadUsage()
	close(start)
	<-p.Done()
	b.StopTimer()
	used := benchsrc.ReadUsage().Sub(cpu)
	b.ReportMetric(float64(used.CPU.Nanoseconds())/float64(b.N), "cpu-ns/op")
	if err := p.Err(); err != nil {
		b.Fatal(err)
	}
	if got := handled.Load(); got != int64(b.N) {
		b.Fatalf("handled %d of %d records", got, b.N)
	}
	for _, c := range src.claims {
		if c.Pending() != 0 {
			b.Fatalf("claim %s waits for %d records", c.Key, c.Pending())
		}
	}
}
