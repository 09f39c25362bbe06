package observe_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/benchsrc"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/kafkatopology"
)

// benchScrapeInterval is how often the "on" benchmarks read /metrics and
// /stats: ten times as often as the examples' Prometheus scrapes and the
// dashboard polls.
const benchScrapeInterval = 100 * time.Millisecond

// discardWriter is an http.ResponseWriter that drops the body, as a
// server streaming it to the scraper keeps none of it (httptest's
// recorder would add the cost of growing a buffer to every scrape).
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// scrape serves one GET of path from h.
func scrape(h http.Handler, path string) {
	h.ServeHTTP(&discardWriter{h: http.Header{}}, httptest.NewRequest("GET", path, nil))
}

// benchMetrics runs b.N messages through a pipeline with two processors
// (and a batcher of 100 when batched); with on, an Observer registered on
// a registry is scraped through its handler (/metrics and /stats) every
// benchScrapeInterval while they flow.
func benchMetrics(b *testing.B, batched, on bool) {
	b.ReportAllocs()
	ack := &benchsrc.Counter{}
	src := benchsrc.NewSlab(b.N, ack)
	runtime.GC()
	opts := pipeline.Options[int, int]{
		Name:     "bench",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			return m.Data*2 + 1, nil
		}},
	}
	if batched {
		opts.Batchers = []batcher.Options[int]{{Name: "default", BatchSize: 100,
			Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil }}}
	}
	p, err := pipeline.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	if on {
		obs := observe.New(observe.Options{})
		if err := obs.Add(b.Context(), p); err != nil {
			b.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(obs)
		h := obs.Handler(reg)
		wg.Go(func() {
			t := time.NewTicker(benchScrapeInterval)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				scrape(h, "/metrics")
				scrape(h, "/stats")
			}
		})
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := benchsrc.CPU()
	b.ResetTimer()
	close(src.Start)
	<-p.Done()
	b.StopTimer()
	cpu = benchsrc.CPU() - cpu
	runtime.ReadMemStats(&after)
	close(stop)
	wg.Wait()
	if n := ack.N.Load(); n != int64(b.N) {
		b.Fatalf("acknowledged %d of %d messages", n, b.N)
	}
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "msgs/s")
	}
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/msg")
	}
	// Includes the scrapes' own allocations, which do not grow with b.N.
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N), "allocs/msg")
}

// BenchmarkMetricsCost measures what exporting metrics costs a pipeline
// that does almost nothing per message: off, no Observer; on, an Observer
// scraped every benchScrapeInterval. Run both in alternation (see
// docs/performance.md).
func BenchmarkMetricsCost(b *testing.B) {
	for _, c := range []struct {
		name    string
		batched bool
	}{{"processors", false}, {"batcher100", true}} {
		for _, on := range []bool{false, true} {
			name := c.name + "/off"
			if on {
				name = c.name + "/on"
			}
			b.Run(name, func(b *testing.B) { benchMetrics(b, c.batched, on) })
		}
	}
}

// BenchmarkScrape measures one scrape of a running pipeline with a
// batcher: the Observer's handler serving /metrics, and /stats.
func BenchmarkScrape(b *testing.B) {
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:     "scraped",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[int]{Source: endless(), RateLimit: &producer.RateLimit{Allowed: 10, Interval: time.Second}},
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			return m.Data, nil
		}},
		Batchers: []batcher.Options[int]{{Name: "default", Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil }}},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Stop(context.Background()) })
	obs := observe.New(observe.Options{})
	if err := obs.Add(b.Context(), p); err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)
	h := obs.Handler(reg)
	for _, path := range []string{"/metrics", "/stats"} {
		b.Run(path[1:], func(b *testing.B) {
			b.ReportAllocs()
			cpu := benchsrc.CPU()
			for b.Loop() {
				scrape(h, path)
			}
			if cpu = benchsrc.CPU() - cpu; cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// BenchmarkScrapeTopology measures one scrape of a topology source and of
// a Kafka topology backend listing 0, 1 or 4,000 stalled hold partitions
// (every partition of a large hold topic): /metrics and /stats.
func BenchmarkScrapeTopology(b *testing.B) {
	for _, n := range []int{0, 1, 4000} {
		stalled := make([]kafkatopology.Stall, n)
		for i := range stalled {
			stalled[i] = kafkatopology.Stall{Topic: "orders-hold-5s", Partition: int32(i), Offset: int64(i) * 1000,
				Since: time.Now().Add(-time.Minute), Failures: i%7 + 1, Err: kafkatopology.ErrReleaseStalled}
		}
		obs := observe.New(observe.Options{})
		if err := errors.Join(obs.AddTopology("orders", fixedTopology(topology.Stats{Received: 1000, Acked: 900, Retried: 80, DeadLettered: 20, Subscriptions: 1})),
			obs.AddKafkaTopology("orders-kafka", newFixedKafkaTopology(stalled...))); err != nil {
			b.Fatal(err)
		}
		benchScrapes(b, obs.Handler(nil), fmt.Sprintf("stalls=%d", n))
	}
}

// BenchmarkScrapeTopologyLag measures one scrape of a Kafka topology
// backend whose group readers claim 0, 1 or 4,000 partitions (every
// partition of a large main topic): /metrics and /stats.
func BenchmarkScrapeTopologyLag(b *testing.B) {
	for _, n := range []int{0, 1, 4000} {
		parts := make([]kafkatopology.PartitionStats, n)
		for i := range parts {
			parts[i] = kafkatopology.PartitionStats{Topic: "orders", Partition: int32(i), Group: "orders:billing",
				Committed: int64(i) * 1000, Next: int64(i)*1000 + 500, HighWater: int64(i)*1000 + 900, Lag: 900, FetchLag: 400}
		}
		backend := newFixedKafkaTopology()
		backend.st.Store(&kafkatopology.Stats{Partitions: parts})
		obs := observe.New(observe.Options{})
		if err := obs.AddKafkaTopology("orders-kafka", backend); err != nil {
			b.Fatal(err)
		}
		benchScrapes(b, obs.Handler(nil), fmt.Sprintf("partitions=%d", n))
	}
}

// benchScrapes runs a sub-benchmark of one scrape of h's /metrics and one
// of its /stats, named prefix and the path.
func benchScrapes(b *testing.B, h http.Handler, prefix string) {
	for _, path := range []string{"/metrics", "/stats"} {
		b.Run(prefix+path, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				scrape(h, path)
			}
		})
	}
}
