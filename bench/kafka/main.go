// Command kafka compares the Boulevard Kafka source with a plain sarama
// consumer-group loop, on one in-process kfake cluster; with -client franz
// it compares the franz-go source with a plain franz-go poll loop instead
// (franz.go).
//
// For each backlog size (flag -n, default "100000,1000000") it starts a kfake
// cluster (3 brokers on 127.0.0.1, flag -partitions partitions) in a child
// process (the program itself, told so by an environment variable, so the cluster's copy of
// the backlog stays out of the measured heap), seeds the topic with that
// many records of -size bytes, then reads the whole topic twice, each time
// with a fresh consumer group:
//
//   - plain: one sarama consumer-group member whose ConsumeClaim marks every
//     message (session.MarkMessage) and counts it; offsets auto-commit;
//   - boulevard: the kafka source (one member) feeding a pipeline whose
//     processors (GOMAXPROCS of them, per-partition order kept) return the
//     payload unchanged; every message is acknowledged and its offset
//     committed through the source's checkpoint.
//
// Both sides get the same sarama configuration (saramaConfig); the source
// then sets the fields it owns (auto-commit, initial offset, returned errors,
// and ChannelBufferSize: half the permit window, where the plain loop keeps
// sarama's 256). Each run uses a fresh group on the same topic. Every size
// starts with -warmup unmeasured rounds; then each round runs both sides,
// alternating which goes first, and the medians over -rounds are reported.
// The ratio is the median of the rounds' own ratios (Boulevard's rate over
// the plain loop's in the same round), with their range: the two runs of a
// round are seconds apart, so a machine whose speed drifts (a shared VM)
// moves both, where the ratio of the two medians mixes rounds.
//
// A run ends when every record has been handled; its rate is taken from the
// first to the last record handled, so joining the group is not counted. It
// prints records/s of both, the ratio, the peak Go heap above the baseline
// measured after seeding (runtime/metrics, sampled every 5ms), which shows
// whether consumer memory grows with the backlog, and the process CPU time
// (user + system, GC included) per record, which is steadier than the rate
// on a shared machine, then the cluster process's CPU per record while each
// side read, and each side's garbage collection cycles ("gc") and minor
// page faults ("faults") in a run, medians: a side that keeps more memory
// alive or lets the runtime hand memory back faults more, and pays the
// kernel for each fault. The cluster keeps the backlog in memory, hence the
// child process and the baseline subtraction. Each measured round also
// prints one line on standard error (flag -q turns them off): both sides'
// rate, CPU per record, collections and faults, what its client fetched
// (fetch responses, record batches and bytes received, from sarama's
// metrics or franz-go's hooks), and the round's ratio, so that a slow round
// can be told from a slow side, and a side that fetched differently from
// one that spent more on each record.
//
// -window, -processors, -maxdemand and -unordered set the Boulevard side's
// permit window, processor count, processor chunk size and ordering.
//
// -plain-processors gives the plain side the shape of a pipeline too: its
// reading goroutine hands each record over a buffered channel to one of as
// many processor goroutines as Boulevard has (a partition's records always
// to the same one, so that they stay in offset order), and the processor
// counts the record and only then marks it for the next commit. That is
// what a hand-written consumer that handles records off its reading
// goroutine does; the targets compare with the plain loops without it.
// -cpuprofile profiles the whole run; samples carry a pprof label
// side=plain|boulevard (-tagfocus side=boulevard). -memprofile writes an
// allocation profile.
//
// Usage (from the bench directory):
//
//	go run ./kafka
//	go run ./kafka -n 100000,1000000 -rounds 5
//	go run ./kafka -window 512 -maxdemand 64 -cpuprofile cpu.out
//	go run ./kafka -client franz -n 1000000 -rounds 7
//	go run ./kafka -client franz -plain-processors -n 1000000 -rounds 7
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/benchsrc"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

const topic = "bench"

type config struct {
	Sizes      []int
	Partitions int
	RecordSize int
	Rounds     int
	// Warmup rounds are run before the measured ones and not counted.
	Warmup  int
	Timeout time.Duration
	// Window is the pipeline's permit window per partition
	// (producer.Flow.Initial); 0 keeps the source's default
	// (kafka.DefaultWindow).
	Window int
	// Processors and MaxDemand are the pipeline's processor options; 0
	// keeps the defaults (GOMAXPROCS and 10).
	Processors, MaxDemand int
	// Unordered sets the source's Unordered option (no per-partition
	// order: messages are balanced over the processors).
	Unordered bool
	// Client is "sarama" (the kafka source against a plain sarama group
	// loop, the default) or "franz" (the franz source against a plain
	// franz-go poll loop; see franz.go).
	Client string
	// PlainProcessors gives the plain side processor goroutines, as
	// Boulevard has (see handOff): not the shape the targets compare with.
	PlainProcessors bool
	// Progress, when set, gets one line per measured round with both
	// sides' figures and the round's ratio, so that the spread between
	// rounds can be read next to what each side did (collections, faults).
	Progress io.Writer
}

func main() {
	cfg := config{}
	var sizes string
	flag.StringVar(&sizes, "n", "100000,1000000", "comma-separated backlog sizes")
	flag.IntVar(&cfg.Partitions, "partitions", 6, "partitions of the topic")
	flag.IntVar(&cfg.RecordSize, "size", 100, "record value size in bytes")
	flag.IntVar(&cfg.Rounds, "rounds", 5, "runs of each side per size (alternating which goes first; medians reported)")
	flag.IntVar(&cfg.Warmup, "warmup", 1, "unmeasured rounds of each side per size before the measured ones")
	flag.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "give up a run after this long")
	flag.IntVar(&cfg.Window, "window", 0, "Boulevard permit window per partition (producer.Flow.Initial); 0 = the source's default (kafka.DefaultWindow)")
	flag.IntVar(&cfg.Processors, "processors", 0, "Boulevard processors (processor.Options.Concurrency); 0 = default GOMAXPROCS")
	flag.IntVar(&cfg.MaxDemand, "maxdemand", 0, "Boulevard processor chunk size (processor.Options.MaxDemand); 0 = default 10")
	flag.BoolVar(&cfg.Unordered, "unordered", false, "Boulevard source with Unordered: true (no per-partition order)")
	flag.StringVar(&cfg.Client, "client", "sarama", "Kafka client of both sides: sarama or franz (franz-go)")
	flag.BoolVar(&cfg.PlainProcessors, "plain-processors", false, "the plain side hands each record to processor goroutines (as many as Boulevard's, a partition's records to one of them) and commits only handled records")
	memprofile := flag.String("memprofile", "", "write an allocation profile of the whole run to this file")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	quiet := flag.Bool("q", false, "do not print a line per round on standard error")
	flag.Parse()
	if !*quiet {
		cfg.Progress = os.Stderr
	}
	if maybeServeCluster() {
		return
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	for s := range strings.SplitSeq(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bad size %q\n", s)
			os.Exit(2)
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	if _, err := run(cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	if *memprofile != "" {
		f, err := os.Create(*memprofile)
		if err == nil {
			err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// result is one backlog size's figures.
type result struct {
	N                  int
	PlainRate, BlvRate float64 // records/s, medians
	PlainHeap, BlvHeap uint64  // peak heap above baseline, bytes, max over rounds
	PlainCPU, BlvCPU   float64 // process CPU ns per record, medians
	// Ratio is the median over rounds of BlvRate/PlainRate within a round;
	// RatioMin and RatioMax are their range.
	Ratio, RatioMin, RatioMax float64
	// PlainClusterCPU and BlvClusterCPU are the cluster process's CPU ns
	// per record while each side read, medians (0 where /proc is missing).
	PlainClusterCPU, BlvClusterCPU float64
	// PlainGCs and BlvGCs are the garbage collection cycles of a run,
	// PlainFaults and BlvFaults its minor page faults (benchsrc.Usage),
	// medians.
	PlainGCs, BlvGCs, PlainFaults, BlvFaults float64
}

func run(cfg config, out io.Writer) ([]result, error) {
	po := processor.Options[[]byte, []byte]{Concurrency: cfg.Processors, MaxDemand: cfg.MaxDemand}.WithDefaults()
	if cfg.Client == "" {
		cfg.Client = "sarama"
	}
	if cfg.Client != "sarama" && cfg.Client != "franz" {
		return nil, fmt.Errorf("unknown client %q (sarama or franz)", cfg.Client)
	}
	fmt.Fprintf(out, "kfake, 3 brokers, %d partitions, %d-byte records, GOMAXPROCS %d, %d round(s), client %s, Boulevard window %d, %d processors, max demand %d, unordered %v, plain processors %v\n",
		cfg.Partitions, cfg.RecordSize, runtime.GOMAXPROCS(0), cfg.Rounds, cfg.Client, window(cfg),
		po.Concurrency, po.MaxDemand, cfg.Unordered, cfg.PlainProcessors)
	fmt.Fprintf(out, "%10s %14s %14s %7s %13s %16s %16s %10s %10s %12s %8s %13s\n", "records", "plain rec/s", "boulevard rec/s", "ratio",
		"ratio range", "plain peak heap", "blvd peak heap", "plain cpu", "blvd cpu", "cluster cpu", "gc", "faults")
	var results []result
	for _, n := range cfg.Sizes {
		r, err := runSize(cfg, n)
		if err != nil {
			return results, err
		}
		results = append(results, r)
		fmt.Fprintf(out, "%10d %14.0f %14.0f %6.1f%% %5.1f–%5.1f%% %13.1f MiB %13.1f MiB %7.0f ns %7.0f ns %5.0f/%.0f ns %4.0f/%.0f %6.0f/%.0f\n", n, r.PlainRate, r.BlvRate,
			100*r.Ratio, 100*r.RatioMin, 100*r.RatioMax, mib(r.PlainHeap), mib(r.BlvHeap), r.PlainCPU, r.BlvCPU, r.PlainClusterCPU, r.BlvClusterCPU,
			r.PlainGCs, r.BlvGCs, r.PlainFaults, r.BlvFaults)
	}
	return results, nil
}

// window is the Boulevard side's permit window.
func window(cfg config) int {
	if cfg.Window == 0 {
		return kafka.DefaultWindow
	}
	return producer.Flow{Initial: cfg.Window}.WithDefaults().MaxWindow()
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// serveEnv, set in the child process, holds the number of partitions of the
// cluster it serves.
const serveEnv = "BOULEVARD_BENCH_KFAKE_PARTITIONS"

// maybeServeCluster serves the cluster and exits when this is the child
// process; it reports false in the parent.
func maybeServeCluster() bool {
	v := os.Getenv(serveEnv)
	if v == "" {
		return false
	}
	parts, err := strconv.Atoi(v)
	if err == nil {
		err = serveCluster(parts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// serveCluster runs the cluster of the child process.
func serveCluster(partitions int) error {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(int32(partitions), topic),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cluster.Close()
	fmt.Println(strings.Join(cluster.ListenAddrs(), ","))
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	return nil
}

// childCluster is a kfake cluster in a child process, so that its memory
// (the whole backlog) stays out of the measured heap.
type childCluster struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addrs []string
}

func startChildCluster(partitions int) (*childCluster, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), serveEnv+"="+strconv.Itoa(partitions))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("cluster process: %w", err)
	}
	return &childCluster{cmd: cmd, stdin: stdin, addrs: strings.Split(strings.TrimSpace(line), ",")}, nil
}

// cpuTime is the user and system CPU time the cluster process has used, at
// the kernel's clock-tick resolution; 0 without /proc.
func (c *childCluster) cpuTime() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which ends at the last ')')
	// start with the state (field 3); utime and stime are fields 14 and
	// 15, in clock ticks.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks
}

func (c *childCluster) Close() error {
	_ = c.stdin.Close()
	return c.cmd.Wait()
}

func runSize(cfg config, n int) (result, error) {
	cluster, err := startChildCluster(cfg.Partitions)
	if err != nil {
		return result{}, err
	}
	defer cluster.Close()
	if err := seed(cluster.addrs, n, cfg.RecordSize); err != nil {
		return result{}, err
	}
	r := result{N: n}
	var plain, blv, plainCPU, blvCPU, plainCl, blvCl, plainGC, blvGC, plainPF, blvPF, ratios []float64
	var plainFetched, blvFetched string // the last round's
	type side struct {
		name       string
		fn         func(ctx context.Context, cfg config, brokers []string, group string, c *clock) error
		rates, cpu *[]float64
		clusterCPU *[]float64
		gcs, pfs   *[]float64
		heap       *uint64
		fetched    *string
	}
	sides := []side{
		{"plain", runPlain, &plain, &plainCPU, &plainCl, &plainGC, &plainPF, &r.PlainHeap, &plainFetched},
		{"boulevard", runBoulevard, &blv, &blvCPU, &blvCl, &blvGC, &blvPF, &r.BlvHeap, &blvFetched},
	}
	if cfg.Client == "franz" {
		sides[0].fn, sides[1].fn = runPlainFranz, runBoulevardFranz
	}
	for round := -cfg.Warmup; round < cfg.Rounds; round++ {
		// Alternate which side goes first: the second run of a round finds
		// the cluster warmer and the heap in another state. Warm-up rounds
		// (negative) are run the same way and not counted.
		order := sides
		if (round+cfg.Warmup)%2 == 1 {
			order = []side{sides[1], sides[0]}
		}
		for _, side := range order {
			cl0 := cluster.cpuTime()
			m, err := measure(cfg, side.fn, cluster.addrs, fmt.Sprintf("%s-%d", side.name, round+cfg.Warmup), n)
			cl := cluster.cpuTime() - cl0
			if err != nil {
				return r, fmt.Errorf("%s, %d records: %w", side.name, n, err)
			}
			if round < 0 {
				continue
			}
			*side.rates = append(*side.rates, m.rate)
			*side.cpu = append(*side.cpu, m.cpuPerRecord)
			*side.clusterCPU = append(*side.clusterCPU, float64(cl.Nanoseconds())/float64(n))
			*side.gcs = append(*side.gcs, m.gcs)
			*side.pfs = append(*side.pfs, m.faults)
			*side.heap = max(*side.heap, m.heap)
			*side.fetched = m.fetched
		}
		if round >= 0 {
			ratios = append(ratios, blv[len(blv)-1]/plain[len(plain)-1])
			if cfg.Progress != nil {
				i := len(ratios) - 1
				fmt.Fprintf(cfg.Progress, "%d records, round %d: plain %.0f rec/s %.0f cpu-ns/rec %.0f gc %.0f pf (%s) | boulevard %.0f rec/s %.0f cpu-ns/rec %.0f gc %.0f pf (%s) | ratio %.1f%%\n",
					n, i+1, plain[i], plainCPU[i], plainGC[i], plainPF[i], plainFetched, blv[i], blvCPU[i], blvGC[i], blvPF[i], blvFetched, 100*ratios[i])
			}
		}
	}
	r.Ratio = median(ratios)
	r.RatioMin, r.RatioMax = slices.Min(ratios), slices.Max(ratios)
	r.PlainRate, r.BlvRate = median(plain), median(blv)
	r.PlainCPU, r.BlvCPU = median(plainCPU), median(blvCPU)
	r.PlainClusterCPU, r.BlvClusterCPU = median(plainCl), median(blvCl)
	r.PlainGCs, r.BlvGCs = median(plainGC), median(blvGC)
	r.PlainFaults, r.BlvFaults = median(plainPF), median(blvPF)
	return r, nil
}

// median returns the median of xs (the upper one of an even count),
// leaving xs as it was.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// seed produces n records round-robin over the topic's partitions.
func seed(brokers []string, n, size int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchMaxBytes(256<<10),
		// Uncompressed, so that sarama's fetch size (1 MiB per partition)
		// bounds the records a fetch decodes.
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	val := make([]byte, size)
	for i := range val {
		val[i] = byte('a' + i%26)
	}
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				firstErr.CompareAndSwap(nil, &err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return *p
	}
	return nil
}

// heapBytes reads the live heap as of the last GC.
func heapBytes(s []metrics.Sample) uint64 {
	metrics.Read(s)
	return s[0].Value.Uint64()
}

const liveHeap = "/gc/heap/live:bytes"

// clock records when the first and the last of n records were handled.
type clock struct {
	n           int64
	count       atomic.Int64
	first, last atomic.Int64 // unix nanoseconds
	done        chan struct{}
	// fetched is what the side's client fetched in the run.
	fetched fetched
}

func newClock(n int) *clock { return &clock{n: int64(n), done: make(chan struct{})} }

// tick counts one handled record.
func (c *clock) tick() {
	switch k := c.count.Add(1); k {
	case 1:
		c.first.Store(time.Now().UnixNano())
		if c.n == 1 {
			c.last.Store(c.first.Load())
			close(c.done)
		}
	case c.n:
		c.last.Store(time.Now().UnixNano())
		close(c.done)
	}
}

func (c *clock) check(side string) error {
	if got := c.count.Load(); got < c.n {
		return fmt.Errorf("%s: %d of %d records before the timeout", side, got, c.n)
	}
	return nil
}

// measurement is one run of one side.
type measurement struct {
	rate         float64 // records/s, first to last record handled
	cpuPerRecord float64 // process CPU time (user+system) per record, ns
	heap         uint64  // peak live heap above the baseline, bytes
	gcs          float64 // garbage collection cycles that ended during the run
	faults       float64 // minor page faults of the run (benchsrc.Usage)
	fetched      string  // what the client fetched (fetched.String)
}

// measure runs fn once and returns its records/s (from the first to the last
// record handled, so joining the group is not counted), the CPU time the
// process spent per record (the cluster runs in another process, so this is
// the consumer's own cost, GC included) and its peak live heap above the
// baseline taken just before.
func measure(cfg config, fn func(context.Context, config, []string, string, *clock) error, brokers []string, group string, n int) (measurement, error) {
	samples := []metrics.Sample{{Name: liveHeap}}
	runtime.GC()
	runtime.GC()
	base := heapBytes(samples)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		s := []metrics.Sample{{Name: liveHeap}}
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if h := heapBytes(s); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-t.C:
			case <-stop:
				return
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	c := newClock(n)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	use0 := benchsrc.ReadUsage()
	var err error
	// The side's goroutines (sarama's included) inherit the label, so a
	// -cpuprofile can be split with -tagfocus side=plain|boulevard.
	pprof.Do(ctx, pprof.Labels("side", strings.SplitN(group, "-", 2)[0]), func(ctx context.Context) {
		err = fn(ctx, cfg, brokers, group, c)
	})
	use := benchsrc.ReadUsage().Sub(use0)
	runtime.ReadMemStats(&after)
	close(stop)
	wg.Wait()
	if err != nil {
		return measurement{}, err
	}
	p := peak.Load()
	if p < base {
		p = base
	}
	elapsed := time.Duration(c.last.Load() - c.first.Load())
	return measurement{
		rate:         float64(n-1) / elapsed.Seconds(),
		cpuPerRecord: float64(use.CPU.Nanoseconds()) / float64(n),
		heap:         p - base,
		gcs:          float64(after.NumGC - before.NumGC),
		faults:       float64(use.Faults),
		fetched:      c.fetched.String(),
	}, nil
}

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_0_0_0
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond
	c.Consumer.Group.Session.Timeout = 3 * time.Second
	return c
}

// plainHandler marks every message and counts it; with processors (see
// handOff) it hands each message to one instead, which marks and counts
// it.
type plainHandler struct {
	c          *clock
	processors int // 0: none
	procs      *handOff[*sarama.ConsumerMessage]
}

func (h *plainHandler) Setup(sess sarama.ConsumerGroupSession) error {
	if h.processors > 0 {
		h.procs = startHandOff(h.processors, func(msg *sarama.ConsumerMessage) {
			h.c.tick()
			sess.MarkMessage(msg, "")
		})
	}
	return nil
}

// Cleanup runs once every ConsumeClaim has returned: nothing is handed
// over any more.
func (h *plainHandler) Cleanup(sarama.ConsumerGroupSession) error {
	if h.procs != nil {
		h.procs.close()
		h.procs = nil
	}
	return nil
}

func (h *plainHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			if h.procs != nil {
				if !h.procs.send(sess.Context(), int(msg.Partition), msg) {
					return nil
				}
				continue
			}
			sess.MarkMessage(msg, "")
			h.c.tick()
		case <-sess.Context().Done():
			return nil
		}
	}
}

// plainProcessors is how many processor goroutines the plain side has: 0
// unless cfg.PlainProcessors, then as many as Boulevard's processors.
func plainProcessors(cfg config) int {
	if !cfg.PlainProcessors {
		return 0
	}
	return processor.Options[[]byte, []byte]{Concurrency: cfg.Processors}.WithDefaults().Concurrency
}

// handOffCap is the capacity of each plain processor's channel: sarama's
// default per-partition channel size.
const handOffCap = 256

// handOff is the plain side's processors (-plain-processors): the shape of
// a hand-written consumer that handles records on other goroutines than
// the one reading them, as a pipeline does. Each processor has a buffered
// channel; a partition's records all go to one processor, so they are
// handled in offset order; the processor handles a record and then marks
// it for the next commit, so only handled records are committed.
type handOff[R any] struct {
	chans []chan R
	wg    sync.WaitGroup
}

func startHandOff[R any](n int, handle func(R)) *handOff[R] {
	h := &handOff[R]{chans: make([]chan R, n)}
	for i := range h.chans {
		ch := make(chan R, handOffCap)
		h.chans[i] = ch
		h.wg.Go(func() {
			for r := range ch {
				handle(r)
			}
		})
	}
	return h
}

// send hands r, of partition part, to its processor; false when ctx ended
// first.
func (h *handOff[R]) send(ctx context.Context, part int, r R) bool {
	select {
	case h.chans[part%len(h.chans)] <- r:
		return true
	case <-ctx.Done():
		return false
	}
}

// close ends the processors once they have handled what was sent, and
// waits for them.
func (h *handOff[R]) close() {
	for _, ch := range h.chans {
		close(ch)
	}
	h.wg.Wait()
}

func runPlain(ctx context.Context, cfg config, brokers []string, group string, c *clock) error {
	conf := countFetches(saramaConfig())
	cg, err := sarama.NewConsumerGroup(brokers, group, conf)
	if err != nil {
		return err
	}
	h := &plainHandler{c: c, processors: plainProcessors(cfg)}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var consumeErr error
	wg.Go(func() {
		for cctx.Err() == nil {
			if err := cg.Consume(cctx, []string{topic}, h); err != nil && cctx.Err() == nil {
				consumeErr = err
				cancel()
			}
		}
	})
	select {
	case <-c.done:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	if err := cg.Close(); err != nil {
		return err
	}
	c.fetched.fromSarama(conf)
	if consumeErr != nil {
		return consumeErr
	}
	return c.check("plain")
}

func runBoulevard(ctx context.Context, cfg config, brokers []string, group string, c *clock) error {
	conf := countFetches(saramaConfig())
	src, err := kafka.New(kafka.Options{
		Brokers:       brokers,
		GroupID:       group,
		Topics:        []string{topic},
		InitialOffset: kafka.OffsetEarliest,
		Unordered:     cfg.Unordered,
		Config:        conf,
	})
	if err != nil {
		return err
	}
	err = runPipeline(ctx, cfg, src, c)
	c.fetched.fromSarama(conf)
	return err
}

// runPipeline runs the Boulevard side's pipeline on src (either client's
// source) until every record has been handled: handlers that count and
// return the payload, the processor options and window of cfg.
func runPipeline(ctx context.Context, cfg config, src producer.Source[[]byte], c *clock) error {
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:     "bench",
		Producer: producer.Options[[]byte]{Source: src, Flow: producer.Flow{Initial: cfg.Window}},
		Processors: processor.Options[[]byte, []byte]{
			Concurrency: cfg.Processors,
			MaxDemand:   cfg.MaxDemand,
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				c.tick()
				return m.Data, nil
			},
		},
	})
	if err != nil {
		return err
	}
	if err := p.Start(ctx); err != nil {
		return err
	}
	select {
	case <-c.done:
	case <-ctx.Done():
	}
	stopErr := p.Stop(context.Background())
	return errors.Join(c.check("boulevard"), stopErr)
}
