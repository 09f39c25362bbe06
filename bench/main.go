// Command compare runs one workload on Boulevard and on a hand-written
// pipeline of plain Go channels and goroutines, in one process, and prints
// the throughput of both, their ratio and the allocations per message of
// each.
//
// The workload: N messages (flag -n) from a source, through 2 processors
// (flag -processors) that transform each payload, into one batcher that
// groups them by 100 (flag -batch) or emits a partial batch after a timeout
// (flag -timeout), then one batch processor that sums the batch and
// acknowledges it with one ack call per acknowledger per batch. Every message
// carries its own acknowledger reference and id, on both sides.
//
// The hand-written side is: source goroutine → buffered chan (64) → 2
// processor goroutines → chan (200) → batcher goroutine → batch chan (2) →
// batch-processor goroutine → ack call per batch. The channel capacities are
// the queue capacities Boulevard gives the same topology.
//
// Each measured run includes building and starting the pipeline and its
// drain. Runs alternate between the two sides (flag -rounds, default 3, each)
// after one warm-up run of each, and the medians are compared. Allocations
// are runtime.MemStats.Mallocs deltas around each run divided by N.
//
// With -topic the workload crosses an internal topic (see topic.go): on the
// Boulevard side pipeline A publishes every message into a balanced
// in-memory topic through topic/sink, and pipeline B reads it with the topic
// source (topic/source) and does the processing, batching and batch
// handling; on the hand-written side the same two stages are joined by one
// buffered channel. -topic disabled runs it with ack_propagation disabled
// (A's messages are acknowledged once handed over), -topic auto with
// ack_propagation auto (A's source is acknowledged only after B handled the
// message: one acknowledgement per message, on both sides), -topic both
// runs the two one after the other.
//
// Usage (from the bench directory):
//
//	go run . -n 1000000
//	go run . -n 1000000 -topic both
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
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

// config is one workload.
type config struct {
	// N is the number of messages.
	N int
	// Processors is the number of processor goroutines.
	Processors int
	// BatchSize is the number of messages per batch.
	BatchSize int
	// Timeout is the batch timeout.
	Timeout time.Duration
	// Demand is Boulevard's processor MaxDemand (chunk size); 0 means
	// the default, 10.
	Demand int
	// Window is the Initial permits of Boulevard's source feed, with
	// Threshold and Refill half of it; 0 means the defaults 100/50/50.
	Window int
	// Prealloc makes both sources initialise messages of a slice allocated
	// before the measured run (and reused by every run) instead of
	// allocating one per message, so that the allocation figures show the
	// pipelines' own allocations only.
	Prealloc bool
	// Topic selects the topic-hop workload (see topic.go): topicNone is
	// the single pipeline.
	Topic topicMode
	// HopCap is the topic's balanced queue_capacity and the hand-written
	// hop channel's capacity; 0 means the topic default, 1024.
	HopCap int
	// MaxInFlight is the topic's ack_propagation.max_in_flight (-topic
	// auto); 0 means the default, 1024.
	MaxInFlight int
}

// runners returns the two sides of cfg's workload.
func (c config) runners() (boulevard, hand runner) {
	if c.Topic == topicNone {
		return runBoulevard, runHand
	}
	return runBoulevardTopic, runHandTopic
}

// Queue capacities of the hand-written pipeline: the ones Boulevard gives
// the same topology (processor queue max(2·processors·MaxDemand, 64) with
// MaxDemand 10, batcher input max(2·BatchSize, 64), batch queue
// 2·batch processors).
func (c config) handInCap() int    { return max(2*c.Processors*c.demand(), 64) }
func (c config) handOutCap() int   { return max(2*c.BatchSize, 64) }
func (c config) handBatchCap() int { return 2 }

func (c config) demand() int { return cmp.Or(c.Demand, processor.DefaultMaxDemand) }

func (c config) flow() producer.Flow {
	if c.Window <= 1 {
		return producer.Flow{}
	}
	return producer.Flow{Initial: c.Window, Threshold: c.Window / 2, Refill: c.Window - c.Window/2}
}

// transform is the processors' work on one payload, the same on both sides.
func transform(v uint64) uint64 { return v*0x9E3779B97F4A7C15 ^ v>>7 }

// expectedChecksum is the sum of transform(i) over every message.
func expectedChecksum(n int) uint64 {
	var s uint64
	for i := range n {
		s += transform(uint64(i))
	}
	return s
}

// tally records what the acknowledger saw during one run. seen[i] counts the
// acknowledgements of message i. It also holds the pre-allocated messages of
// both sides (config.Prealloc), which are allocated, and their pages touched,
// before a measured run, and reused from run to run.
type tally struct {
	mu       sync.Mutex
	seen     []uint8
	calls    int
	failed   int
	checksum atomic.Uint64
	// done counts the messages the batch handlers have handled; acked
	// those acknowledged. early counts the ack calls after which more
	// messages were acknowledged than handled: an acknowledgement that did
	// not wait for the batch handler (expected only with -topic disabled,
	// where A acknowledges on hand-off).
	done  atomic.Int64
	acked int64
	early int
	// hop is what the Boulevard side of a topic run saw of its topic.
	hop hopStats

	blvdSlab []message.Message[uint64]
	handSlab []handMsg
}

func (t *tally) reset(cfg config) {
	n := cfg.N
	if cap(t.seen) < n {
		t.seen = make([]uint8, n)
	}
	t.seen = t.seen[:n]
	clear(t.seen)
	t.calls, t.failed = 0, 0
	t.checksum.Store(0)
	t.done.Store(0)
	t.acked, t.early = 0, 0
	t.hop = hopStats{}
	if cfg.Prealloc {
		if len(t.blvdSlab) < n {
			t.blvdSlab = make([]message.Message[uint64], n)
			t.handSlab = make([]handMsg, n)
			// Let the GC cycle these allocations start finish, so that
			// the writes below take no write barriers.
			runtime.GC()
		}
		// Touch every page so that no page fault lands in the measurement.
		for i := range n {
			t.blvdSlab[i].Init(0, nil, 0)
			t.handSlab[i] = handMsg{}
		}
	}
}

// handled records a batch of n messages whose payloads sum to sum, before
// the batch is acknowledged.
func (t *tally) handled(sum uint64, n int) {
	t.checksum.Add(sum)
	t.done.Add(int64(n))
}

// acks records an ack call for n messages; the caller holds t.mu.
func (t *tally) acks(n int) {
	t.calls++
	t.acked += int64(n)
	if t.acked > t.done.Load() {
		t.early++
	}
}

// verify checks that every message was acknowledged exactly once, none
// failed, the batch handlers saw every transformed payload, and, except for
// -topic disabled, no message was acknowledged before it was handled.
func (t *tally) verify(cfg config) error {
	n := cfg.N
	var errs []error
	missing, dup := 0, 0
	for _, c := range t.seen[:n] {
		switch {
		case c == 0:
			missing++
		case c > 1:
			dup++
		}
	}
	if missing > 0 || dup > 0 {
		errs = append(errs, fmt.Errorf("%d of %d messages never acknowledged, %d acknowledged more than once", missing, n, dup))
	}
	if t.failed > 0 {
		errs = append(errs, fmt.Errorf("%d messages failed", t.failed))
	}
	if got, want := t.checksum.Load(), expectedChecksum(n); got != want {
		errs = append(errs, fmt.Errorf("batch handlers' checksum %d, want %d", got, want))
	}
	if cfg.Topic != topicDisabled && t.early > 0 {
		errs = append(errs, fmt.Errorf("%d ack calls acknowledged messages before the batch handler had handled them", t.early))
	}
	return errors.Join(errs...)
}

// ---- Boulevard ----

// blvdAcker is the source's acknowledger on the Boulevard side.
type blvdAcker struct{ t *tally }

func (a *blvdAcker) Ack(_ context.Context, successful, failed []acker.Outcome) {
	a.t.mu.Lock()
	for i := range successful {
		a.t.seen[successful[i].ID]++
	}
	for i := range failed {
		a.t.seen[failed[i].ID]++
	}
	a.t.failed += len(failed)
	a.t.acks(len(successful) + len(failed))
	a.t.mu.Unlock()
}

// deliverChunk is the most messages the Boulevard source delivers at once.
const deliverChunk = 64

// blvdSource makes n messages and delivers them within its feed's permits.
type blvdSource struct {
	producer.Basic
	n    int
	ack  *blvdAcker
	slab []message.Message[uint64] // non-nil with config.Prealloc
}

func (s *blvdSource) Run(ctx context.Context, st *producer.Stage[uint64]) error {
	feed := st.NewFeed("compare", nil)
	buf := make([]*message.Message[uint64], 0, deliverChunk)
	for i := 0; i < s.n; {
		k, err := feed.Acquire(ctx, min(deliverChunk, s.n-i))
		if err != nil {
			return nil
		}
		for j := i; j < i+k; j++ {
			var m *message.Message[uint64]
			if s.slab != nil {
				m = &s.slab[j]
				m.Init(uint64(j), s.ack, uint64(j))
			} else {
				m = message.New(uint64(j), s.ack, uint64(j))
			}
			buf = append(buf, m)
		}
		feed.Deliver(buf...)
		clear(buf)
		buf = buf[:0]
		i += k
	}
	return nil
}

func runBoulevard(cfg config, t *tally) error { return runBoulevardHooks(cfg, t, nil) }

// runBoulevardHooks is runBoulevard with hooks as the pipeline's telemetry
// hooks (nil: none).
func runBoulevardHooks(cfg config, t *tally, hooks *telemetry.Hooks) error {
	src := &blvdSource{n: cfg.N, ack: &blvdAcker{t: t}}
	if cfg.Prealloc {
		src.slab = t.blvdSlab[:cfg.N]
	}
	opts := batchingOptions("compare", src, cfg, t)
	opts.Telemetry = hooks
	p, err := pipeline.New(opts)
	if err != nil {
		return err
	}
	// Run returns once the source is exhausted and every message is
	// acknowledged.
	return p.Run(context.Background())
}

// ---- hand-written ----

// handMsg is the hand-written pipeline's message: payload, acknowledger and
// per-message id, like a Boulevard message.
type handMsg struct {
	data uint64
	id   uint64
	ack  handAcker
}

// handAcker receives the outcome of a batch in one call.
type handAcker interface {
	Ack(batch []*handMsg)
}

// handSource sends the hand-written side's cfg.N messages into in, from slab
// when it is not nil, then closes in.
func handSource(cfg config, slab []handMsg, ack *handTally, in chan<- *handMsg) {
	for i := range cfg.N {
		var m *handMsg
		if slab != nil {
			m = &slab[i]
			*m = handMsg{data: uint64(i), id: uint64(i), ack: ack}
		} else {
			m = &handMsg{data: uint64(i), id: uint64(i), ack: ack}
		}
		in <- m
	}
	close(in)
}

// batchingOptions is the comparison's Boulevard pipeline from src on: the
// processors transform each payload, one batcher groups them by
// cfg.BatchSize, and the batch handler sums the batch into t.
func batchingOptions(name string, src producer.Source[uint64], cfg config, t *tally) pipeline.Options[uint64, uint64] {
	return pipeline.Options[uint64, uint64]{
		Name:     name,
		Producer: producer.Options[uint64]{Source: src, Flow: cfg.flow()},
		Processors: processor.Options[uint64, uint64]{
			Concurrency: cfg.Processors,
			MaxDemand:   cfg.demand(),
			Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				return transform(m.Data), nil
			},
		},
		Batchers: []batcher.Options[uint64]{{
			Name:         message.DefaultBatcher,
			BatchSize:    cfg.BatchSize,
			BatchTimeout: cfg.Timeout,
			Handle: func(_ context.Context, batch []*message.Message[uint64], _ message.BatchInfo) error {
				var s uint64
				for _, m := range batch {
					s += m.Data
				}
				t.handled(s, len(batch))
				return nil
			},
		}},
	}
}

type handTally struct{ t *tally }

func (a *handTally) Ack(batch []*handMsg) {
	a.t.mu.Lock()
	for _, m := range batch {
		a.t.seen[m.id]++
	}
	a.t.acks(len(batch))
	a.t.mu.Unlock()
}

func runHand(cfg config, t *tally) error {
	ack := &handTally{t: t}
	var slab []handMsg
	if cfg.Prealloc {
		slab = t.handSlab[:cfg.N]
	}
	in := make(chan *handMsg, cfg.handInCap())
	out := make(chan *handMsg, cfg.handOutCap())
	batches := make(chan []*handMsg, cfg.handBatchCap())
	done := make(chan struct{})

	// Source.
	go handSource(cfg, slab, ack, in)

	// Processors.
	var procs sync.WaitGroup
	for range cfg.Processors {
		procs.Add(1)
		go func() {
			defer procs.Done()
			for m := range in {
				m.data = transform(m.data)
				out <- m
			}
		}()
	}
	go func() {
		procs.Wait()
		close(out)
	}()

	// Batcher: emit at BatchSize, after Timeout since the batch's first
	// message, or when the input ends.
	go handBatcher(cfg, out, batches)

	// Batch processor: handle the batch, then one ack call per batch.
	go func() {
		defer close(done)
		for batch := range batches {
			var s uint64
			for _, m := range batch {
				s += m.data
			}
			t.handled(s, len(batch))
			batch[0].ack.Ack(batch) // every message has the same acknowledger
		}
	}()
	<-done
	return nil
}

// ---- measurement ----

// sample is one measured run.
type sample struct {
	Elapsed    time.Duration
	MsgsPerSec float64
	AllocsPer  float64 // mallocs per message
	BytesPer   float64 // bytes allocated per message
	AcksPer    float64 // ack calls per message
	CPUPer     float64 // the process's CPU time per message, in ns
	// EarlyAcks is the number of ack calls that acknowledged messages
	// before the batch handler had handled them (tally.early).
	EarlyAcks int
	// Hop is what a Boulevard topic run saw of its topic.
	Hop hopStats
}

type runner func(config, *tally) error

// measure runs one side once and checks its outcome. The goroutines of the
// run carry the pprof label side=name, so that a CPU profile (-cpuprofile)
// can be split with go tool pprof -tagfocus side=boulevard.
func measure(name string, run runner, cfg config, t *tally) (sample, error) {
	t.reset(cfg)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var err error
	cpu0 := benchsrc.CPU()
	start := time.Now()
	pprof.Do(context.Background(), pprof.Labels("side", name), func(context.Context) {
		err = run(cfg, t)
	})
	elapsed := time.Since(start)
	cpu := benchsrc.CPU() - cpu0
	runtime.ReadMemStats(&after)
	if err != nil {
		return sample{}, err
	}
	if err := t.verify(cfg); err != nil {
		return sample{}, err
	}
	n := float64(cfg.N)
	return sample{
		Elapsed:    elapsed,
		MsgsPerSec: n / elapsed.Seconds(),
		AllocsPer:  float64(after.Mallocs-before.Mallocs) / n,
		BytesPer:   float64(after.TotalAlloc-before.TotalAlloc) / n,
		AcksPer:    float64(t.calls) / n,
		CPUPer:     float64(cpu.Nanoseconds()) / n,
		EarlyAcks:  t.early,
		Hop:        t.hop,
	}, nil
}

// side is the results of one pipeline over all rounds.
type side struct {
	Name    string
	Samples []sample
}

// Median returns the sample with the median throughput.
func (s side) Median() sample {
	ss := slices.Clone(s.Samples)
	slices.SortFunc(ss, func(a, b sample) int { return cmp.Compare(a.MsgsPerSec, b.MsgsPerSec) })
	return ss[len(ss)/2]
}

// report is the outcome of a comparison.
type report struct {
	Config    config
	Boulevard side
	Hand      side
}

// Ratio is Boulevard's median throughput over the hand-written one's.
func (r report) Ratio() float64 {
	return r.Boulevard.Median().MsgsPerSec / r.Hand.Median().MsgsPerSec
}

// compare warms up both sides, then runs them alternately rounds times each.
// progress, if not nil, receives one line per run.
func compare(cfg config, rounds int, warmup int, progress io.Writer) (report, error) {
	r := report{Config: cfg, Boulevard: side{Name: "boulevard"}, Hand: side{Name: "hand-written"}}
	var t tally
	blvd, hand := cfg.runners()
	if warmup > 0 {
		wcfg := cfg
		wcfg.N = warmup
		for name, run := range map[string]runner{"boulevard": blvd, "hand": hand} {
			if _, err := measure(name, run, wcfg, &t); err != nil {
				return r, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	for i := range rounds {
		for _, s := range []*side{&r.Boulevard, &r.Hand} {
			name, run := "boulevard", blvd
			if s == &r.Hand {
				name, run = "hand", hand
			}
			smp, err := measure(name, run, cfg, &t)
			if err != nil {
				return r, fmt.Errorf("%s, round %d: %w", s.Name, i+1, err)
			}
			s.Samples = append(s.Samples, smp)
			if progress != nil {
				fmt.Fprintf(progress, "round %d %-12s %6.3fs %12.0f msgs/s %7.4f allocs/msg %7.1f B/msg %.4f acks/msg",
					i+1, s.Name, smp.Elapsed.Seconds(), smp.MsgsPerSec, smp.AllocsPer, smp.BytesPer, smp.AcksPer)
				if cfg.Topic != topicNone {
					fmt.Fprintf(progress, " %d early ack calls", smp.EarlyAcks)
				}
				fmt.Fprintln(progress)
			}
		}
	}
	return r, nil
}

func (r report) print(w io.Writer) {
	b, h := r.Boulevard.Median(), r.Hand.Median()
	// The message each source creates is one allocation per message; what
	// is beyond it is the pipeline's own.
	perMsg := 1.0
	if r.Config.Prealloc {
		perMsg = 0
	}
	if r.Config.Topic == topicNone {
		fmt.Fprintf(w, "\nmedian of %d rounds:\n", len(r.Boulevard.Samples))
	} else {
		fmt.Fprintf(w, "\nmedian of %d rounds, topic hop with ack_propagation %s:\n", len(r.Boulevard.Samples), r.Config.Topic)
	}
	fmt.Fprintf(w, "  %-12s %12.0f msgs/s  %7.4f allocs/msg (%+.4f beyond the message)  %7.1f B/msg\n",
		"boulevard", b.MsgsPerSec, b.AllocsPer, b.AllocsPer-perMsg, b.BytesPer)
	fmt.Fprintf(w, "  %-12s %12.0f msgs/s  %7.4f allocs/msg (%+.4f beyond the message)  %7.1f B/msg\n",
		"hand-written", h.MsgsPerSec, h.AllocsPer, h.AllocsPer-perMsg, h.BytesPer)
	if r.Config.Topic != topicNone {
		fmt.Fprintf(w, "  ack calls per message: boulevard %.4f, hand-written %.4f\n", b.AcksPer, h.AcksPer)
	}
	ratio := r.Ratio()
	fmt.Fprintf(w, "  ratio boulevard/hand-written throughput: %.2f\n", ratio)
	fmt.Fprintf(w, "targets: throughput ratio >= 0.50: %s; boulevard allocs/msg beyond the message <= 1: %s\n",
		verdict(ratio >= 0.5), verdict(b.AllocsPer-perMsg <= 1))
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func main() {
	var cfg config
	flag.IntVar(&cfg.N, "n", 1_000_000, "messages per run")
	flag.IntVar(&cfg.Processors, "processors", 2, "processor goroutines")
	flag.IntVar(&cfg.BatchSize, "batch", 100, "batch size")
	flag.DurationVar(&cfg.Timeout, "timeout", time.Second, "batch timeout")
	flag.IntVar(&cfg.Demand, "demand", 0, "Boulevard processor MaxDemand (0: default 10); the hand-written input channel follows it")
	flag.IntVar(&cfg.Window, "window", 0, "Boulevard permit window Initial, with Threshold and Refill half of it (0: default 100/50/50)")
	flag.BoolVar(&cfg.Prealloc, "prealloc", false, "initialise messages of a pre-allocated slice instead of allocating one per message")
	rounds := flag.Int("rounds", 3, "measured runs of each pipeline, alternating")
	warmup := flag.Int("warmup", 100_000, "messages of the warm-up run of each pipeline (0: none)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the warm-up and measured rounds to this file (goroutines are labelled side=boulevard or side=hand)")
	metricsEvery := flag.Duration("metrics-cost", 0, "instead of the comparison: Boulevard alone without and with its Prometheus metrics served at this interval, paired rounds (for example 100ms)")
	telemetryCost := flag.Bool("telemetry-cost", false, "instead of the comparison: Boulevard alone without and with every telemetry hook set to a function that does nothing, paired rounds")
	topicFlag := flag.String("topic", "none", "workload across an internal topic hop: none, disabled or auto (ack_propagation), or both (disabled, then auto)")
	flag.IntVar(&cfg.HopCap, "hopcap", 0, "with -topic: the topic's balanced queue_capacity and the hand-written hop channel's capacity (0: default 1024)")
	flag.IntVar(&cfg.MaxInFlight, "inflight", 0, "with -topic auto: the topic's ack_propagation.max_in_flight (0: default 1024); below -batch, every batch of B waits for -timeout")
	flag.Parse()
	if cfg.N < 1 || cfg.Processors < 1 || cfg.BatchSize < 1 || cfg.Timeout <= 0 || *rounds < 1 || cfg.HopCap < 0 || cfg.MaxInFlight < 0 {
		fmt.Fprintln(os.Stderr, "compare: -n, -processors, -batch, -rounds must be >= 1, -timeout > 0, -hopcap and -inflight >= 0")
		os.Exit(2)
	}
	modes, err := parseTopicModes(*topicFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}

	fmt.Printf("%s %s/%s GOMAXPROCS=%d NumCPU=%d\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU())
	fl := cfg.flow().WithDefaults()
	fmt.Printf("workload: %d messages, %d processors, batch size %d, batch timeout %s, prealloc %v, %d rounds each after a %d-message warm-up\n",
		cfg.N, cfg.Processors, cfg.BatchSize, cfg.Timeout, cfg.Prealloc, *rounds, *warmup)
	if modes[0] == topicNone {
		fmt.Printf("boulevard: max demand %d, permit window %d/%d/%d; hand-written: channel capacities %d, %d, %d\n",
			cfg.demand(), fl.Initial, fl.Threshold, fl.Refill, cfg.handInCap(), cfg.handOutCap(), cfg.handBatchCap())
	} else {
		to := cfg.topicOptions(topicAuto)
		fmt.Printf("topic hop: boulevard pipeline A (%d processors publishing through topic/sink) -> in-memory balanced topic (capacity %d; max_in_flight %d with auto) -> pipeline B (topic source, %d processors, batcher); max demand %d, permit windows %d/%d/%d\n",
			cfg.Processors, to.Balanced.Capacity, to.AckPropagation.MaxInFlight, cfg.Processors, cfg.demand(), fl.Initial, fl.Threshold, fl.Refill)
		fmt.Printf("hand-written: channel capacities %d (A), %d (hop), %d, %d (B)\n",
			cfg.handInCap(), cfg.handHopCap(), cfg.handOutCap(), cfg.handBatchCap())
	}

	if *telemetryCost {
		if err := pairedCost(cfg, *rounds, *warmup, "telemetry hooks", runBoulevardHooked, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		return
	}
	if *metricsEvery > 0 {
		with := func(cfg config, t *tally) error { return runBoulevardScraped(cfg, t, *metricsEvery) }
		if err := pairedCost(cfg, *rounds, *warmup, "metrics served every "+metricsEvery.String(), with, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		return
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	for _, mode := range modes {
		cfg.Topic = mode
		if mode != topicNone {
			fmt.Printf("\n-- topic hop, ack_propagation %s --\n", mode)
		}
		r, err := compare(cfg, *rounds, *warmup, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			pprof.StopCPUProfile()
			os.Exit(1)
		}
		r.print(os.Stdout)
	}
}
