// Command minimal compares Boulevard with the smallest hand-written pipeline
// a user would write for the same job, in one process, in paired rounds.
//
// The hand-written pipeline is the practical limit: one source goroutine
// that allocates a *msg{id, data} per record and sends it over a buffered
// channel (capacity 100) to the processor goroutines (2 by default), which
// send over a buffered channel (100) to one batcher goroutine that hands
// every batch of 100 to the batch handler (no timeout, no extra hop, one
// batch slice reused for ever). Boulevard runs the same job through its
// public API: a source that allocates one message per record with
// message.New and delivers within its permits, the processors, one batcher
// and its batch processor.
//
// Both sides do the same work, and the code below keeps it so:
//
//   - the records are the same N × 16-byte payloads, made before the run;
//   - each source allocates one message per record (a *msg on the
//     hand-written side, a *message.Message[[]byte] on Boulevard's);
//   - each processor calls check on the payload;
//   - each batch handler calls check on the payload of every message of its
//     batch and records the message as handled (seen[id]++);
//   - without batchers (-workload procs), the processor records every
//     message as handled instead: on Boulevard's side its acknowledger does,
//     once per chunk, since that is where Boulevard reports the message's end.
//
// Boulevard also acknowledges every message (one call per batch, or per
// processor chunk without batchers) and the hand-written pipeline does not:
// that bookkeeping is Boulevard's own cost. Every run is checked: each
// message handled exactly once.
//
// Workloads (-workload, comma-separated; "all" runs the first three):
// batch (batches of -batch, default 100), procs (processors only: the
// minimal pipeline without its batcher), batch1 (batch size 1), scale (the
// batch workload with 2, 4 and 8 processors, Boulevard and hand-written,
// each count in its own rounds), latency (a steady offered rate, see
// latency.go) and msgsize (the hand-written processors-only pipeline with
// messages of three sizes, see msgsize.go).
//
// Each round runs both sides once, in alternating order, after one warm-up
// run of each as long as a round's (flag -warmup), which grows the heap to
// its full size before the first round. The figure of merit of a workload
// is the median over rounds of the ratio of the two sides' throughputs in
// the same round.
// Allocations are runtime.MemStats.Mallocs deltas around the run divided by
// N, CPU the process's user+system time per message. Each round's line
// also gives, per side, the garbage collection cycles of the run ("gc") and
// its minor page faults ("pf"): pages the heap took from the system, or back
// after the runtime returned them. On a virtual machine a fault can cost
// more than a hundred messages' work, so they explain much of the spread
// between rounds.
//
// -demand and -window set Boulevard's processor chunk size (MaxDemand) and
// permit window (Flow.Initial) for measuring what those settings buy; they
// change Boulevard's side only, so the targets are measured without them.
//
// Usage (from the bench directory):
//
//	go run ./minimal -n 1000000 -rounds 9
//	go run ./minimal -workload scale -rounds 7
//	go run ./minimal -workload latency -rounds 7
//	go run ./minimal -workload procs -rounds 3 -trace /tmp/tr && go run ./schedtrace /tmp/tr-procs-*.trace
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
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
)

// recordSize is the payload size of every record.
const recordSize = 16

// chanCap is the capacity of the hand-written pipeline's two channels.
const chanCap = 100

// config is one workload.
type config struct {
	N          int
	Processors int
	// BatchSize is the batch size; 0 means processors only.
	BatchSize int
	// Demand is Boulevard's processor MaxDemand; 0 means its default.
	Demand int
	// Window is Boulevard's permit window (producer.Flow.Initial, which
	// also sizes the processors' queue); 0 means its default. Like Demand
	// it is a setting of Boulevard's side only, for measuring what the
	// setting buys, not the comparison's targets.
	Window int
	// Slab makes Boulevard's source take its messages from a message.Slab
	// (one allocation per block of messages) rather than allocate each
	// with message.New. It changes Boulevard's side of the workload: it
	// measures what the helper saves, not the comparison's targets.
	Slab bool
	// Trace, when set, makes measure write an execution trace of the run
	// to Trace + "-" + side + ".trace" (see the schedtrace command).
	Trace string
}

// records are the payloads both sides carry, made once.
type records [][]byte

func makeRecords(n int) records {
	buf := make([]byte, n*recordSize)
	r := make(records, n)
	for i := range r {
		b := buf[i*recordSize : (i+1)*recordSize : (i+1)*recordSize]
		binary.LittleEndian.PutUint64(b, uint64(i)+1)
		binary.LittleEndian.PutUint64(b[8:], ^uint64(i))
		r[i] = b
	}
	return r
}

// errBadRecord is what check reports for a payload it does not expect.
var errBadRecord = errors.New("bad record")

// check is the work both sides' processors and batch handlers do on a
// payload: it reads both halves.
func check(b []byte) error {
	if len(b) != recordSize || binary.LittleEndian.Uint64(b)^binary.LittleEndian.Uint64(b[8:]) == 0 {
		return errBadRecord
	}
	return nil
}

// tally is what one run saw.
type tally struct {
	seen   []uint8
	failed atomic.Int64
}

func (t *tally) reset(n int) {
	if cap(t.seen) < n {
		t.seen = make([]uint8, n)
	}
	t.seen = t.seen[:n]
	clear(t.seen)
	t.failed.Store(0)
}

func (t *tally) verify() error {
	missing, dup := 0, 0
	for _, c := range t.seen {
		switch {
		case c == 0:
			missing++
		case c > 1:
			dup++
		}
	}
	if missing > 0 || dup > 0 || t.failed.Load() > 0 {
		return fmt.Errorf("%d of %d messages never handled, %d handled more than once, %d failed", missing, len(t.seen), dup, t.failed.Load())
	}
	return nil
}

// ---- hand-written ----

// msg is the hand-written pipeline's message.
type msg struct {
	id   uint64
	data []byte
}

func runHand(cfg config, recs records, t *tally) error {
	in := make(chan *msg, chanCap)
	go func() {
		for i := range cfg.N {
			in <- &msg{id: uint64(i), data: recs[i]}
		}
		close(in)
	}()
	out := make(chan *msg, chanCap)
	var procs sync.WaitGroup
	for range cfg.Processors {
		procs.Go(func() {
			for m := range in {
				if err := check(m.data); err != nil {
					t.failed.Add(1)
					continue
				}
				if cfg.BatchSize == 0 {
					t.seen[m.id]++
					continue
				}
				out <- m
			}
		})
	}
	if cfg.BatchSize == 0 {
		procs.Wait()
		return nil
	}
	go func() {
		procs.Wait()
		close(out)
	}()
	batch := make([]*msg, 0, cfg.BatchSize)
	handle := func() {
		for _, m := range batch {
			if check(m.data) != nil {
				t.failed.Add(1)
			}
			t.seen[m.id]++
		}
		clear(batch)
		batch = batch[:0]
	}
	for m := range out {
		batch = append(batch, m)
		if len(batch) == cfg.BatchSize {
			handle()
		}
	}
	handle()
	return nil
}

// ---- Boulevard ----

// blvdSource allocates one message per record with message.New (or,
// with slab, takes it from a message.Slab) and delivers them within its
// feed's permits, up to 64 at a time.
type blvdSource struct {
	producer.Basic
	recs records
	ack  acker.Acknowledger
	slab bool
}

func (s *blvdSource) Run(ctx context.Context, st *producer.Stage[[]byte]) error {
	feed := st.NewFeed("minimal", nil)
	buf := make([]*message.Message[[]byte], 0, 64)
	var slab message.Slab[[]byte]
	for i := 0; i < len(s.recs); {
		k, err := feed.Acquire(ctx, min(cap(buf), len(s.recs)-i))
		if err != nil {
			return nil
		}
		for j := i; j < i+k; j++ {
			if s.slab {
				buf = append(buf, slab.New(s.recs[j], s.ack, uint64(j)))
			} else {
				buf = append(buf, message.New(s.recs[j], s.ack, uint64(j)))
			}
		}
		feed.Deliver(buf...)
		clear(buf)
		buf = buf[:0]
		i += k
	}
	return nil
}

// endAcker records, without batchers, every successful message as handled;
// with batchers the batch handler does, and it only counts failures.
type endAcker struct {
	t      *tally
	record bool
}

func (a *endAcker) Ack(_ context.Context, successful, failed []acker.Outcome) {
	if a.record {
		for i := range successful {
			a.t.seen[successful[i].ID]++
		}
	}
	if len(failed) > 0 {
		a.t.failed.Add(int64(len(failed)))
	}
}

func blvdOptions(cfg config, recs records, t *tally) pipeline.Options[[]byte, []byte] {
	opts := pipeline.Options[[]byte, []byte]{
		Name:   "minimal",
		Logger: quiet,
		Producer: producer.Options[[]byte]{
			Source: &blvdSource{recs: recs[:cfg.N], ack: &endAcker{t: t, record: cfg.BatchSize == 0}, slab: cfg.Slab},
			Flow:   producer.Flow{Initial: cfg.Window},
		},
		Processors: processor.Options[[]byte, []byte]{
			Concurrency: cfg.Processors,
			MaxDemand:   cfg.Demand,
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				return m.Data, check(m.Data)
			},
		},
	}
	if cfg.BatchSize > 0 {
		opts.Batchers = []batcher.Options[[]byte]{{
			Name:      message.DefaultBatcher,
			BatchSize: cfg.BatchSize,
			// Longer than any run: batches end by size or at the drain,
			// as the hand-written batcher's do.
			BatchTimeout: time.Hour,
			Handle: func(_ context.Context, batch []*message.Message[[]byte], _ message.BatchInfo) error {
				for _, m := range batch {
					if check(m.Data) != nil {
						t.failed.Add(1)
					}
					_, id, _ := m.Acknowledger()
					t.seen[id]++
				}
				return nil
			},
		}}
	}
	return opts
}

func runBoulevard(cfg config, recs records, t *tally) error {
	p, err := pipeline.New(blvdOptions(cfg, recs, t))
	if err != nil {
		return err
	}
	// Run returns once the source is exhausted and every message is
	// acknowledged.
	return p.Run(context.Background())
}

// quiet drops the pipelines' logs (start, stop), which would otherwise
// interleave with the results.
var quiet = slog.New(slog.DiscardHandler)

// ---- measurement ----

type runner func(config, records, *tally) error

// sample is one measured run.
type sample struct {
	MsgsPerSec float64
	AllocsPer  float64
	CPUNsPer   float64
	// GCs is the garbage collection cycles that ended during the run.
	GCs float64
	// Faults is the minor page faults of the run (benchsrc.Usage).
	Faults float64
}

func measure(side string, run runner, cfg config, recs records, t *tally) (sample, error) {
	t.reset(cfg.N)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	stopTrace, err := startTrace(cfg.Trace, side)
	if err != nil {
		return sample{}, err
	}
	use0 := benchsrc.ReadUsage()
	start := time.Now()
	pprof.Do(context.Background(), pprof.Labels("side", side), func(context.Context) {
		err = run(cfg, recs, t)
	})
	elapsed := time.Since(start)
	use := benchsrc.ReadUsage().Sub(use0)
	if terr := stopTrace(); err == nil {
		err = terr
	}
	runtime.ReadMemStats(&after)
	if err == nil {
		err = t.verify()
	}
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w", side, err)
	}
	n := float64(cfg.N)
	return sample{
		MsgsPerSec: n / elapsed.Seconds(),
		AllocsPer:  float64(after.Mallocs-before.Mallocs) / n,
		CPUNsPer:   float64(use.CPU.Nanoseconds()) / n,
		GCs:        float64(after.NumGC - before.NumGC),
		Faults:     float64(use.Faults),
	}, nil
}

// startTrace starts an execution trace into prefix-side.trace, unless prefix
// is empty, and returns the function that stops it.
func startTrace(prefix, side string) (stop func() error, err error) {
	if prefix == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(prefix + "-" + side + ".trace")
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		trace.Stop()
		return f.Close()
	}, nil
}

// pair is the samples of both sides over the rounds of one workload.
type pair struct {
	Name        string
	Cfg         config
	Blvd, Hand  []sample
	RoundRatios []float64
}

func median[T any](xs []T, key func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = key(x)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func thr(s sample) float64    { return s.MsgsPerSec }
func allocs(s sample) float64 { return s.AllocsPer }
func cpuNs(s sample) float64  { return s.CPUNsPer }
func ident(f float64) float64 { return f }

// Ratio is the median of the per-round throughput ratios, Boulevard over
// hand-written.
func (p pair) Ratio() float64 { return median(p.RoundRatios, ident) }

// runPair warms up both sides and runs them rounds times, alternating
// which goes first.
func runPair(name string, cfg config, recs records, rounds, warmup int, progress io.Writer) (pair, error) {
	p := pair{Name: name, Cfg: cfg}
	var t tally
	// Only the last round is traced.
	tracePrefix := cfg.Trace
	cfg.Trace = ""
	if warmup > 0 {
		w := cfg
		w.N = min(warmup, cfg.N)
		for _, run := range []runner{runBoulevard, runHand} {
			if _, err := measure("warmup", run, w, recs, &t); err != nil {
				return p, err
			}
		}
	}
	for r := range rounds {
		var b, h sample
		var err error
		order := []string{"boulevard", "hand"}
		if r%2 == 1 {
			order = []string{"hand", "boulevard"}
		}
		if r == rounds-1 && tracePrefix != "" {
			cfg.Trace = tracePrefix + "-" + name
		}
		for _, side := range order {
			if side == "boulevard" {
				b, err = measure(side, runBoulevard, cfg, recs, &t)
			} else {
				h, err = measure(side, runHand, cfg, recs, &t)
			}
			if err != nil {
				return p, err
			}
		}
		p.Blvd = append(p.Blvd, b)
		p.Hand = append(p.Hand, h)
		p.RoundRatios = append(p.RoundRatios, b.MsgsPerSec/h.MsgsPerSec)
		if progress != nil {
			fmt.Fprintf(progress, "%-8s round %2d  boulevard %6.2f M/s %5.0f cpu-ns/msg %.3f allocs/msg %2.0f gc %5.0f pf | hand %6.2f M/s %5.0f cpu-ns/msg %.3f allocs/msg %2.0f gc %5.0f pf | ratio %.2f\n",
				name, r+1, b.MsgsPerSec/1e6, b.CPUNsPer, b.AllocsPer, b.GCs, b.Faults,
				h.MsgsPerSec/1e6, h.CPUNsPer, h.AllocsPer, h.GCs, h.Faults, b.MsgsPerSec/h.MsgsPerSec)
		}
	}
	return p, nil
}

func (p pair) print(w io.Writer) {
	rr := slices.Clone(p.RoundRatios)
	slices.Sort(rr)
	fmt.Fprintf(w, "%-8s processors %d batch %d: boulevard %6.2f M/s (%4.0f cpu-ns/msg, %.3f allocs/msg), hand %6.2f M/s (%4.0f cpu-ns/msg, %.3f allocs/msg); ratio median %.2f (range %.2f-%.2f over %d rounds)\n",
		p.Name, p.Cfg.Processors, p.Cfg.BatchSize,
		median(p.Blvd, thr)/1e6, median(p.Blvd, cpuNs), median(p.Blvd, allocs),
		median(p.Hand, thr)/1e6, median(p.Hand, cpuNs), median(p.Hand, allocs),
		p.Ratio(), rr[0], rr[len(rr)-1], len(rr))
}

// scaling runs the batch workload with each processor count of counts, all
// counts in every round (in a rotating order), and reports the medians.
func scaling(cfg config, counts []int, recs records, rounds, warmup int, w io.Writer) error {
	res := make(map[string][]sample)
	var t tally
	key := func(side string, n int) string { return fmt.Sprintf("%s/%d", side, n) }
	for _, n := range counts {
		c := cfg
		c.Processors = n
		c.N = min(warmup, cfg.N)
		if _, err := measure("warmup", runBoulevard, c, recs, &t); err != nil {
			return err
		}
	}
	for r := range rounds {
		for i := range counts {
			n := counts[(i+r)%len(counts)]
			c := cfg
			c.Processors = n
			for _, side := range []string{"boulevard", "hand"} {
				run := runBoulevard
				if side == "hand" {
					run = runHand
				}
				s, err := measure(side, run, c, recs, &t)
				if err != nil {
					return err
				}
				res[key(side, n)] = append(res[key(side, n)], s)
			}
		}
		fmt.Fprintf(w, "scale round %d done\n", r+1)
	}
	for _, side := range []string{"boulevard", "hand"} {
		fmt.Fprintf(w, "scale %-9s", side)
		for _, n := range counts {
			ss := res[key(side, n)]
			fmt.Fprintf(w, "  %d processors: %6.2f M/s (%4.0f cpu-ns/msg)", n, median(ss, thr)/1e6, median(ss, cpuNs))
		}
		fmt.Fprintln(w)
	}
	return nil
}

func main() {
	n := flag.Int("n", 1_000_000, "records per run")
	procs := flag.Int("processors", 2, "processor goroutines")
	batch := flag.Int("batch", 100, "batch size of the batch workload")
	demand := flag.Int("demand", 0, "Boulevard processor MaxDemand (0: its default)")
	window := flag.Int("window", 0, "Boulevard permit window, producer.Flow.Initial, which also sizes the processors' queue (0: its default)")
	slab := flag.Bool("slab", false, "Boulevard's source takes its messages from a message.Slab instead of message.New (not the compared workload)")
	rounds := flag.Int("rounds", 9, "paired rounds per workload")
	warmup := flag.Int("warmup", -1, "records of the warm-up run of each side; -1: as many as a measured run (-n), so that the heap has its full size before the first round")
	workloads := flag.String("workload", "all", "comma-separated: batch, procs, batch1, scale, latency, msgsize; all = batch,procs,batch1")
	rate := flag.Int("rate", 100_000, "latency: messages per second offered")
	dur := flag.Duration("duration", 2*time.Second, "latency: length of one run")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file (goroutines labelled side=boulevard or side=hand)")
	tracePrefix := flag.String("trace", "", "write an execution trace of each side's last round of the batch, procs and batch1 workloads to PREFIX-WORKLOAD-SIDE.trace (summarise them with go run ./schedtrace)")
	flag.Parse()
	if *warmup < 0 {
		*warmup = *n
	}

	fmt.Printf("%s %s/%s GOMAXPROCS=%d NumCPU=%d\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU())
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "minimal:", err)
			os.Exit(1)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "minimal:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	list := *workloads
	if list == "all" {
		list = "batch,procs,batch1"
	}
	recs := makeRecords(*n)
	base := config{N: *n, Processors: *procs, BatchSize: *batch, Demand: *demand, Window: *window, Slab: *slab, Trace: *tracePrefix}
	var results []pair
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "minimal:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
	for _, wl := range strings.Split(list, ",") {
		cfg := base
		switch wl {
		case "batch":
		case "procs":
			cfg.BatchSize = 0
		case "batch1":
			cfg.BatchSize = 1
		case "scale":
			cfg.Trace = "" // the flag covers batch, procs and batch1 only
			if err := scaling(cfg, []int{2, 4, 8}, recs, *rounds, *warmup, os.Stdout); err != nil {
				fail(err)
			}
			continue
		case "msgsize":
			cfg.Trace = ""
			if err := msgSizes(cfg, recs, *rounds, *warmup, os.Stdout); err != nil {
				fail(err)
			}
			continue
		case "latency":
			lc := latencyConfig{Rate: *rate, Duration: *dur, Processors: *procs, BatchSize: 100, Timeout: 10 * time.Millisecond, Demand: *demand, Window: *window}
			if err := latencyPairs(lc, *rounds, os.Stdout); err != nil {
				fail(err)
			}
			continue
		default:
			fail(fmt.Errorf("unknown workload %q", wl))
		}
		p, err := runPair(wl, cfg, recs, *rounds, *warmup, os.Stdout)
		if err != nil {
			fail(err)
		}
		results = append(results, p)
	}
	if len(results) > 0 {
		fmt.Println()
	}
	for _, p := range results {
		p.print(os.Stdout)
	}
}
