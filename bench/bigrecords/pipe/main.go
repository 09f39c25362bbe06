// pipe runs one Boulevard pipeline over 1 MiB-class records and reports its
// peak memory: Go heap (runtime/metrics, sampled every 10 ms) and VmHWM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/kafka/franz"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	tsource "github.com/boulevard-go/boulevard/topic/source"
)

var (
	srcKind   = flag.String("src", "sarama", "sarama, franz, pulsar or mem")
	addr      = flag.String("addr", "127.0.0.1:19092", "broker address")
	n         = flag.Int("n", 100, "records to handle before stopping")
	size      = flag.Int("size", 1<<20, "record bytes (mem only)")
	delay     = flag.Duration("delay", 200*time.Millisecond, "batch handler time per batch")
	batchSize = flag.Int("batch", 10, "batch size")
	window    = flag.Int("window", 0, "producer Flow.Initial (0 = default)")
	procs     = flag.Int("procs", 0, "processor concurrency (0 = default)")
	demand    = flag.Int("demand", 0, "processor MaxDemand (0 = default)")
	bdemand   = flag.Int("bdemand", 0, "batcher MaxDemand (0 = default)")
	pqueue    = flag.Int("pqueue", 0, "Processors.QueueCapacity (0 = derived)")
	bqueue    = flag.Int("bqueue", 0, "batcher QueueCapacity (0 = derived)")
	bbatchq   = flag.Int("bbatchq", 0, "batcher BatchQueueCapacity (0 = derived)")
	fetchDef  = flag.Int("sarama-fetch-default", 0, "sarama Consumer.Fetch.Default (0 = sarama's)")
	fetchMax  = flag.Int("sarama-fetch-max", 0, "sarama Consumer.Fetch.Max (0 = sarama's)")
	chanBuf   = flag.Int("sarama-chanbuf", 0, "sarama ChannelBufferSize (0 = sarama's)")
	maxResp   = flag.Int("sarama-maxresp", 0, "sarama.MaxResponseSize (0 = sarama's)")
	fzMax     = flag.Int("franz-maxbytes", 0, "kgo.FetchMaxBytes (0 = franz-go's)")
	fzPart    = flag.Int("franz-partbytes", 0, "kgo.FetchMaxPartitionBytes (0 = franz-go's)")
	fzRead    = flag.Int("franz-readbytes", 0, "kgo.BrokerMaxReadBytes (0 = franz-go's)")
	noBatch   = flag.Bool("nobatch", false, "no batcher: the processor sleeps delay/batch per message")
	idleWait  = flag.Duration("idle", 300*time.Millisecond, "wait after the last message before measuring the idle heap")
	prof      = flag.String("prof", "", "prefix for heap profiles (alloc at end, inuse after drain)")
	timeout   = flag.Duration("timeout", 3*time.Minute, "give up after")
)

var peakHeap, peakTotal, peakLive atomic.Uint64

func sample(stop <-chan struct{}) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}, {Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		metrics.Read(s)
		if v := s[0].Value.Uint64(); v > peakHeap.Load() {
			peakHeap.Store(v)
		}
		if v := s[1].Value.Uint64(); v > peakTotal.Load() {
			peakTotal.Store(v)
		}
		if v := s[2].Value.Uint64(); v > peakLive.Load() {
			peakLive.Store(v)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

func heapNow() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func status(key string) string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, key+":") {
			return strings.TrimSpace(strings.TrimPrefix(l, key+":"))
		}
	}
	return "?"
}

func mib(v uint64) string { return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20)) }

func main() {
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	stop := make(chan struct{})
	go sample(stop)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	var src producer.Source[[]byte]
	var closeFn func()
	switch *srcKind {
	case "sarama":
		cfg := sarama.NewConfig()
		if *fetchDef > 0 {
			cfg.Consumer.Fetch.Default = int32(*fetchDef)
		}
		if *fetchMax > 0 {
			cfg.Consumer.Fetch.Max = int32(*fetchMax)
		}
		if *maxResp > 0 {
			sarama.MaxResponseSize = int32(*maxResp)
		}
		if *chanBuf > 0 {
			cfg.ChannelBufferSize = *chanBuf
		}
		s, err := kafka.New(kafka.Options{Brokers: []string{*addr}, GroupID: "media", Topics: []string{"media"},
			InitialOffset: kafka.OffsetEarliest, Config: cfg, Logger: logger})
		if err != nil {
			log.Fatal(err)
		}
		src = s
	case "franz":
		var opts []kgo.Opt
		if *fzMax > 0 {
			opts = append(opts, kgo.FetchMaxBytes(int32(*fzMax)))
		}
		if *fzPart > 0 {
			opts = append(opts, kgo.FetchMaxPartitionBytes(int32(*fzPart)))
		}
		if *fzRead > 0 {
			opts = append(opts, kgo.BrokerMaxReadBytes(int32(*fzRead)))
		}
		s, err := franz.New(franz.Options{Brokers: []string{*addr}, GroupID: "media", Topics: []string{"media"},
			InitialOffset: franz.OffsetEarliest, ClientOptions: opts, Logger: logger})
		if err != nil {
			log.Fatal(err)
		}
		src = s
	case "pulsar":
		cl, err := bpulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + *addr}, logger)
		if err != nil {
			log.Fatal(err)
		}
		closeFn = cl.Close
		src = bpulsar.New(bpulsar.Options{Client: cl, Topics: []string{"media"}, Subscription: "media",
			Consumer: pulsar.ConsumerOptions{SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest}})
	case "mem":
		h, err := topic.NewTopic[[]byte]("media", topic.Options{}, nil)
		if err != nil {
			log.Fatal(err)
		}
		s, err := tsource.New(tsource.Options[[]byte]{Topic: h, Mode: topic.Balanced("media")})
		if err != nil {
			log.Fatal(err)
		}
		src = s
		go func() {
			for i := 0; i < *n; i++ {
				b := make([]byte, *size)
				b[0] = byte(i)
				if err := h.Publish(ctx, b); err != nil {
					log.Print(err)
					return
				}
			}
		}()
		closeFn = func() { h.Close() }
	}

	var handled atomic.Int64
	done := make(chan struct{})
	var bytesSeen atomic.Int64
	popts := producer.Options[[]byte]{Source: src}
	if *window > 0 {
		popts.Flow = producer.Flow{Initial: *window}
	}
	opts := pipeline.Options[[]byte, []byte]{
		Name:     "media",
		Logger:   logger,
		Producer: popts,
		Processors: processor.Options[[]byte, []byte]{
			Concurrency:   *procs,
			MaxDemand:     *demand,
			QueueCapacity: *pqueue,
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				bytesSeen.Add(int64(len(m.Data)))
				return m.Data, nil
			},
		},
		Batchers: []batcher.Options[[]byte]{{
			Name: "default", BatchSize: *batchSize, BatchTimeout: 100 * time.Millisecond, MaxDemand: *bdemand,
			QueueCapacity: *bqueue, BatchQueueCapacity: *bbatchq,
			Handle: func(ctx context.Context, batch []*message.Message[[]byte], _ message.BatchInfo) error {
				select {
				case <-time.After(*delay):
				case <-ctx.Done():
					return ctx.Err()
				}
				h := handled.Add(int64(len(batch)))
				if *prof != "" && h-int64(len(batch)) < int64(*n/2) && h >= int64(*n/2) {
					runtime.GC()
					f, _ := os.Create(*prof + ".inuse_mid.pprof")
					pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
					fmt.Printf("mid-run live heap %s\n", mib(heapNow()))
				}
				if h >= int64(*n) {
					select {
					case <-done:
					default:
						close(done)
					}
				}
				return nil
			},
		}},
	}
	if *noBatch {
		per := *delay / time.Duration(*batchSize)
		opts.Batchers = nil
		opts.Processors.Handle = func(ctx context.Context, m *message.Message[[]byte]) ([]byte, error) {
			bytesSeen.Add(int64(len(m.Data)))
			select {
			case <-time.After(per):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			h := handled.Add(1)
			if *prof != "" && h == int64(*n/2) {
				runtime.GC()
				f, _ := os.Create(*prof + ".inuse_mid.pprof")
				pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
				fmt.Printf("mid-run live heap %s\n", mib(heapNow()))
			}
			if h == int64(*n) {
				close(done)
			}
			return nil, nil
		}
	}
	p, err := pipeline.New(opts)
	if err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		fmt.Printf("TIMEOUT after %v: handled %d of %d\n", time.Since(start), handled.Load(), *n)
	}
	el := time.Since(start)
	// Idle but running: everything handled; what is still reachable?
	time.Sleep(*idleWait)
	runtime.GC()
	runtime.GC()
	idle := heapNow()
	if *prof != "" {
		f, _ := os.Create(*prof + ".inuse_idle.pprof")
		pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
	}
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := p.Stop(sctx); err != nil {
		fmt.Println("stop:", err)
	}
	scancel()
	if closeFn != nil {
		closeFn()
	}
	close(stop)
	runtime.GC()
	runtime.GC()
	after := heapNow()
	if *prof != "" {
		f, _ := os.Create(*prof + ".heap.pprof")
		pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("src=%s handled=%d bytes=%s in %v | peak live heap (marked at GC) %s | peak heap objects %s | peak runtime total %s | VmHWM %s | heap idle-after-handled %s | heap after stop %s | TotalAlloc %s | NumGC %d\n",
		*srcKind, handled.Load(), mib(uint64(bytesSeen.Load())), el.Round(time.Millisecond), mib(peakLive.Load()), mib(peakHeap.Load()), mib(peakTotal.Load()),
		status("VmHWM"), mib(idle), mib(after), mib(ms.TotalAlloc), ms.NumGC)
	runtime.KeepAlive(p)
}
