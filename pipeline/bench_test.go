package pipeline_test

// Benchmarks of the message path with trivial handlers. One op is one message
// going from a source through the pipeline to its acknowledger. Each
// benchmark builds and starts one pipeline, then times b.N messages from the
// moment the source starts delivering until the pipeline has drained and
// stopped by itself (the source is exhausted).
//
// Every benchmark has two sub-benchmarks:
//
//   - new:  the source creates each message with message.New, which is one
//     allocation per message (as a real source does);
//   - init: the source initialises messages of a slice allocated before the
//     timer starts (msg.Init), so allocs/msg (allocs/op, not rounded)
//     shows the framework's own per-message allocations.
//
// Run them with, for example:
//
//	go test -run '^$' -bench . -benchtime 1000000x ./pipeline/

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/benchsrc"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/telemetry"
)

// benchDeliverChunk is the most messages the benchmark source hands to its
// feed at once.
const benchDeliverChunk = 64

// benchProcessors is the number of processors in every benchmark pipeline.
const benchProcessors = 2

// benchSource delivers n messages made by next, never more than its feed has
// been granted permits for. It waits for start before delivering the first.
type benchSource[T any] struct {
	producer.Basic
	n     int
	start <-chan struct{}
	next  func(i int) *message.Message[T]
}

func (s *benchSource[T]) Run(ctx context.Context, st *producer.Stage[T]) error {
	feed := st.NewFeed("bench", nil)
	select {
	case <-s.start:
	case <-ctx.Done():
		return nil
	}
	buf := make([]*message.Message[T], 0, benchDeliverChunk)
	for i := 0; i < s.n; {
		k, err := feed.Acquire(ctx, min(benchDeliverChunk, s.n-i))
		if err != nil {
			return nil
		}
		for j := range k {
			buf = append(buf, s.next(i+j))
		}
		feed.Deliver(buf...)
		clear(buf)
		buf = buf[:0]
		i += k
	}
	return nil
}

// benchAcker counts outcomes.
type benchAcker struct {
	ok     atomic.Int64
	failed atomic.Int64
	calls  atomic.Int64
}

func (a *benchAcker) Ack(_ context.Context, successful, failed []acker.Outcome) {
	a.ok.Add(int64(len(successful)))
	a.failed.Add(int64(len(failed)))
	a.calls.Add(1)
}

// benchRecord is the Out payload of the conversion benchmark.
type benchRecord struct {
	Len   int
	First byte
	Last  byte
}

// benchSink keeps handler results alive so the compiler cannot drop them.
var benchSink atomic.Int64

// benchRun runs b.N messages carrying data(i) through a pipeline with two
// processors calling handle and the given batchers. mode is "new" or "init".
func benchRun[In, Out any](b *testing.B, mode string, data func(i int) In, handle processor.Handler[In, Out], batchers []batcher.Options[Out]) {
	benchRunWith(b, mode, data, handle, batchers, nil)
}

// benchRunWith is benchRun with the telemetry hooks given (nil is off).
func benchRunWith[In, Out any](b *testing.B, mode string, data func(i int) In, handle processor.Handler[In, Out], batchers []batcher.Options[Out], hooks *telemetry.Hooks) {
	b.ReportAllocs()
	ack := &benchAcker{}
	start := make(chan struct{})
	var next func(i int) *message.Message[In]
	switch mode {
	case "new":
		next = func(i int) *message.Message[In] { return message.New(data(i), ack, uint64(i)) }
	case "init":
		slab := make([]message.Message[In], b.N)
		// Fault the pages in before the timer starts, after the GC cycle
		// that the large allocation started (so the writes take no
		// write barriers).
		runtime.GC()
		var zero In
		for i := range slab {
			slab[i].Init(zero, ack, 0)
		}
		next = func(i int) *message.Message[In] {
			m := &slab[i]
			m.Init(data(i), ack, uint64(i))
			return m
		}
	default:
		b.Fatalf("unknown mode %q", mode)
	}
	p, err := pipeline.New(pipeline.Options[In, Out]{
		Name:       "bench",
		Telemetry:  hooks,
		Producer:   producer.Options[In]{Source: &benchSource[In]{n: b.N, start: start, next: next}},
		Processors: processor.Options[In, Out]{Concurrency: benchProcessors, Handle: handle},
		Batchers:   batchers,
	})
	if err != nil {
		b.Fatal(err)
	}
	benchTime(b, p, start, ack)
}

// benchTime starts p, times b.N messages from closing start until p has
// stopped by itself, checks that ack saw every one succeed, and reports
// the rate, CPU, acknowledgement calls and allocations per message.
func benchTime[In, Out any](b *testing.B, p *pipeline.Pipeline[In, Out], start chan struct{}, ack *benchAcker) {
	if err := p.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := benchsrc.CPU()
	b.ResetTimer()
	close(start)
	<-p.Done()
	b.StopTimer()
	cpu = benchsrc.CPU() - cpu
	runtime.ReadMemStats(&after)
	if err := p.Err(); err != nil {
		b.Fatal(err)
	}
	if ok, failed := ack.ok.Load(), ack.failed.Load(); ok != int64(b.N) || failed != 0 {
		b.Fatalf("acknowledged %d successful and %d failed of %d messages", ok, failed, b.N)
	}
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "msgs/s")
	}
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/msg")
	}
	b.ReportMetric(float64(ack.calls.Load())/float64(b.N), "acks/msg")
	// allocs/op, unrounded: the framework's share is a small fraction.
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N), "allocs/msg")
}

// BenchmarkSlowHandlers: source → 64 processors whose handler waits 1 ms,
// as one that calls another service does → ack. It measures how quickly
// work spreads over processors that outnumber the cores: with every
// processor busy all the time, 64 000 messages a second.
func BenchmarkSlowHandlers(b *testing.B) {
	const processors = 64
	ack := &benchAcker{}
	start := make(chan struct{})
	b.ReportAllocs()
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name: "bench",
		Producer: producer.Options[int]{
			Source: &benchSource[int]{n: b.N, start: start, next: func(i int) *message.Message[int] { return message.New(i, ack, uint64(i)) }},
			Flow:   producer.Flow{Initial: 4096},
		},
		Processors: processor.Options[int, int]{
			Concurrency: processors,
			Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				time.Sleep(time.Millisecond)
				return m.Data, nil
			},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	benchTime(b, p, start, ack)
}

func benchIntData(i int) int { return i }

func benchIntHandle(_ context.Context, m *message.Message[int]) (int, error) {
	return m.Data*2 + 1, nil
}

func benchBatchHandle[T any](_ context.Context, batch []*message.Message[T], info message.BatchInfo) error {
	benchSink.Add(int64(len(batch)))
	return nil
}

var benchModes = []string{"new", "init"}

// BenchmarkProcessorsOnly: source → 2 processors → ack, no batcher. Outcomes
// are acknowledged once per processor chunk (MaxDemand 10).
func BenchmarkProcessorsOnly(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			benchRun(b, mode, benchIntData, benchIntHandle, nil)
		})
	}
}

// BenchmarkBatcher100: source → 2 processors → one batcher of BatchSize 100 →
// one batch processor → ack once per batch.
func BenchmarkBatcher100(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			benchRun(b, mode, benchIntData, benchIntHandle, []batcher.Options[int]{
				{Name: message.DefaultBatcher, BatchSize: 100, Handle: benchBatchHandle[int]},
			})
		})
	}
}

// BenchmarkConvertBatcher100: like BenchmarkBatcher100, with processors
// turning a []byte payload into a struct (In != Out), so every message is
// carried over into a Message[benchRecord]. All messages share one payload
// slice, so the payload itself allocates nothing.
func BenchmarkConvertBatcher100(b *testing.B) {
	payload := []byte(`{"id":1,"name":"boulevard"}`)
	data := func(int) []byte { return payload }
	handle := func(_ context.Context, m *message.Message[[]byte]) (benchRecord, error) {
		d := m.Data
		return benchRecord{Len: len(d), First: d[0], Last: d[len(d)-1]}, nil
	}
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			benchRun(b, mode, data, handle, []batcher.Options[benchRecord]{
				{Name: message.DefaultBatcher, BatchSize: 100, Handle: benchBatchHandle[benchRecord]},
			})
		})
	}
}

// orderedBenchSource is the shape of the Kafka source: benchFeeds feeds (one
// per partition), each message carrying its feed's partition key, the
// source asking for per-key order, and messages reused once acknowledged,
// each by the feed it came from (Message.Reuse keeps its key).
// It delivers n messages round robin over the feeds, as many at a time as a
// feed has permits, from one goroutine.
type orderedBenchSource struct {
	producer.Basic
	n     int
	start <-chan struct{}
	ack   *recyclingAcker
}

const benchFeeds = 6

func (s *orderedBenchSource) Info() (producer.Info, error) { return producer.Info{Ordered: true}, nil }

func (s *orderedBenchSource) Run(ctx context.Context, st *producer.Stage[int]) error {
	feeds := make([]*producer.Feed[int], benchFeeds)
	keys := make([]string, benchFeeds)
	for i := range feeds {
		keys[i] = "bench/" + string(rune('0'+i))
		feeds[i] = st.NewFeed(keys[i], nil)
	}
	select {
	case <-s.start:
	case <-ctx.Done():
		return nil
	}
	buf := make([]*message.Message[int], 0, 512)
	for i, f := 0, 0; i < s.n; f = (f + 1) % benchFeeds {
		k := feeds[f].TryAcquire(min(512, s.n-i))
		if k == 0 {
			// Nothing granted to this feed yet: wait on it, as a
			// partition reader waits for its grants.
			var err error
			if k, err = feeds[f].Acquire(ctx, min(512, s.n-i)); err != nil {
				return nil
			}
		}
		var reused int
		buf, reused = s.ack.take(buf, f, k)
		for j, m := range buf {
			if j < reused {
				// Back from this feed: what the source set stays, as in
				// the Kafka source's claims.
				m.Reuse(i+j, uint64(i+j))
				continue
			}
			m.Init(i+j, s.ack, uint64(i+j))
			m.SetPartitionKey(keys[f])
		}
		feeds[f].Deliver(buf...)
		clear(buf)
		buf = buf[:0]
		i += k
	}
	return nil
}

// recyclingAcker counts outcomes and keeps the acknowledged messages for the
// source to reuse, each with the feed it came from, as the Kafka source's
// partitions keep their slots.
type recyclingAcker struct {
	benchAcker
	mu   sync.Mutex
	free [benchFeeds][]*message.Message[int]
}

func (a *recyclingAcker) Ack(ctx context.Context, successful, failed []acker.Outcome) {
	a.benchAcker.Ack(ctx, successful, failed)
	a.mu.Lock()
	for _, o := range successful {
		m := o.Message.(*message.Message[int])
		f := benchFeedOf(m.PartitionKey())
		a.free[f] = append(a.free[f], m)
	}
	a.mu.Unlock()
}

// benchFeedOf is the index of the feed whose key is key ("bench/<i>").
func benchFeedOf(key string) int { return int(key[len(key)-1] - '0') }

// take appends k messages for feed f to dst: first those back from f
// (reused of them), then new ones.
func (a *recyclingAcker) take(dst []*message.Message[int], f, k int) (_ []*message.Message[int], reused int) {
	a.mu.Lock()
	free := a.free[f]
	r := min(k, len(free))
	dst = append(dst, free[len(free)-r:]...)
	clear(free[len(free)-r:])
	a.free[f] = free[:len(free)-r]
	a.mu.Unlock()
	for range k - r {
		dst = append(dst, new(message.Message[int]))
	}
	return dst, r
}

// BenchmarkOrderedFeeds: the Kafka source's path without a broker: six
// feeds with a window of 512, per-key order (one processor per key), two
// processors, ack once per processor chunk, messages reused.
func BenchmarkOrderedFeeds(b *testing.B) {
	b.ReportAllocs()
	ack := &recyclingAcker{}
	start := make(chan struct{})
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name: "bench",
		Producer: producer.Options[int]{
			Source: &orderedBenchSource{n: b.N, start: start, ack: ack},
			Flow:   producer.Flow{Initial: 512},
		},
		Processors: processor.Options[int, int]{Concurrency: benchProcessors, Handle: benchIntHandle},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	close(start)
	<-p.Done()
	b.StopTimer()
	if err := p.Err(); err != nil {
		b.Fatal(err)
	}
	if ok := ack.ok.Load(); ok != int64(b.N) {
		b.Fatalf("acknowledged %d of %d messages", ok, b.N)
	}
	b.ReportMetric(float64(ack.calls.Load())/float64(b.N), "acks/msg")
}
