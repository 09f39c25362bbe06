// Command quickstart is a small, complete Boulevard pipeline that runs on its
// own, with no broker:
//
//	go run ./examples/quickstart
//	go run ./examples/quickstart -n 100000 -customers 8 -seed 42 -v
//	go run ./examples/quickstart -http 127.0.0.1:2112 -linger   # metrics and dashboard, kept open after the run
//
// A source (source.go) makes up order events as JSON bytes for a handful of
// customers, a few of them malformed, and hands them to the pipeline under a
// permit window, as a Kafka or Pulsar consumer would. Processors (order.go)
// decode and validate each event into an Order, reject the malformed ones
// with a clear error, and route the valid ones to the "billing" batcher, one
// batch key per customer. The batch handler (report.go) totals each batch.
// Every order's outcome goes back to the source's acknowledger (report.go),
// which counts what succeeded and why the rest failed.
//
// When the source has generated -n orders it returns, the pipeline drains
// (open batches are emitted with trigger "flush") and stops by itself, and
// the program prints the pipeline's topology, per-customer totals, the
// outcome counts and the throughput. Ctrl-C (or SIGTERM) stops it early,
// with the same drain, and the report says it was interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/examples/internal/interrupt"
	"github.com/boulevard-go/boulevard/examples/internal/monitor"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// config is what the flags set.
type config struct {
	// n is the number of orders the source generates before it is exhausted.
	n int
	// customers is the number of distinct customers (batch keys), 1 to
	// maxCustomers.
	customers int
	// seed makes the generated orders reproducible.
	seed uint64
	// sample is how many batches per customer are printed as they happen.
	sample int
	// logger receives the pipeline's logs; nil means slog.Default().
	logger *slog.Logger
	// monitor holds -http and -linger: where to serve the metrics, health
	// checks and dashboard, and how long after the run.
	monitor monitor.Flags
	// observe, when set, is given the pipeline before it runs.
	observe func(context.Context, ...observe.Pipeline) error
}

func main() {
	cfg := config{sample: 3}
	var verbose bool
	flag.IntVar(&cfg.n, "n", 20000, "number of orders to generate")
	flag.IntVar(&cfg.customers, "customers", 5, fmt.Sprintf("number of customers (1 to %d)", maxCustomers))
	flag.Uint64Var(&cfg.seed, "seed", 1, "random seed for the generated orders")
	flag.BoolVar(&verbose, "v", false, "log at debug level to stderr (failed orders: the first in full, then a line every 10s counting those held back)")
	cfg.monitor.Register(flag.CommandLine)
	flag.Parse()

	// The pipeline logs failed messages at warn level: the first in full,
	// then one line every 10 s counting the like failures held back since.
	// The report counts every failure anyway, so by default only errors are
	// logged; -v shows the rest.
	level := slog.LevelError
	if verbose {
		level = slog.LevelDebug
	}
	cfg.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	// Ctrl-C or SIGTERM cancels ctx; pipeline.Run then drains the pipeline
	// and returns.
	ctx, stop := interrupt.Context(context.Background())
	defer stop()

	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run runs the pipeline until the source is exhausted (or ctx is cancelled),
// prints the report to stdout, and checks that every order was accounted for.
func run(ctx context.Context, cfg config, stdout io.Writer) error {
	obs := observe.New(observe.Options{})
	srv, err := cfg.monitor.Serve(ctx, obs, stdout)
	if err != nil {
		return err
	}
	defer srv.Close(ctx) // after the report, for as long as -linger says
	cfg.observe = obs.Add
	res, err := runPipeline(ctx, cfg, stdout)
	if err != nil {
		return err
	}
	res.print(stdout)
	return res.check()
}

// runPipeline declares the pipeline, runs it to completion and returns what
// happened. Batch summaries are printed to stdout while it runs.
func runPipeline(ctx context.Context, cfg config, stdout io.Writer) (*results, error) {
	if cfg.n < 0 {
		return nil, fmt.Errorf("-n must be ≥ 0, got %d", cfg.n)
	}
	if cfg.customers < 1 || cfg.customers > maxCustomers {
		return nil, fmt.Errorf("-customers must be 1 to %d, got %d", maxCustomers, cfg.customers)
	}

	acks := newTally()
	src := newOrderSource(cfg.n, customerNames(cfg.customers), cfg.seed, acks)
	bill := newBilling(stdout, cfg.sample)

	// A pipeline has two payload types: In is what the source produces (raw
	// bytes), Out is what processors turn it into and batchers receive.
	p, err := pipeline.New(pipeline.Options[[]byte, Order]{
		Name:   "quickstart",
		Logger: cfg.logger,
		// How long a drain may take before what is left is abandoned,
		// unacknowledged. Default 30s.
		ShutdownTimeout: 5 * time.Second,
		Producer: producer.Options[[]byte]{
			Source: src,
			// Each feed of the source may run at most
			// max(Initial, Threshold+Refill) messages ahead of the
			// processors. These are the defaults, spelled out.
			Flow: producer.Flow{Initial: 100, Threshold: 50, Refill: 50},
		},
		Processors: processor.Options[[]byte, Order]{
			Concurrency:  4,
			Handle:       decodeOrder,
			HandleFailed: discardPoison,
		},
		Batchers: []batcher.Options[Order]{{
			Name:         billingBatcher,
			BatchSize:    50,
			BatchTimeout: 200 * time.Millisecond,
			Concurrency:  2, // batch processors calling bill.handle
			Handle:       bill.handle,
		}},
		// decodeOrder routes every order to the billing batcher with
		// SetBatcher, so the pipeline needs no batcher named "default".
		ExplicitRouting: true,
	})
	if err != nil {
		// A validate.Errors value naming every broken option, for example
		// "batchers[0].batchSize must be ≥ 1". Nothing was started.
		return nil, err
	}

	if cfg.observe != nil {
		// Adding is setup, not the work an interrupt stops: StatsTimeout bounds it.
		if err := cfg.observe(context.WithoutCancel(ctx), p); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(stdout, "quickstart: %d orders for %d customers (seed %d)\n\n", cfg.n, cfg.customers, cfg.seed)
	fmt.Fprintf(stdout, "first %d batches per customer:\n", cfg.sample)
	start := time.Now()
	// Run blocks until the source is exhausted and everything in flight has
	// been handled and acknowledged, or until ctx is cancelled (then it
	// drains the same way before returning).
	if err := p.Run(ctx); err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	res := collect(src, acks, bill)
	res.elapsed = time.Since(start)
	res.interrupted = ctx.Err() != nil
	res.topology = p.Topology().String()
	return res, nil
}

// maxCustomers is the largest -customers: every customer's name is made
// before the run, and the report prints a line for each of them.
const maxCustomers = 10_000

// customerNames returns n customer names: fictional companies, then
// numbered ones when there are more customers than names.
func customerNames(n int) []string {
	known := []string{"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka", "tyrell", "soylent"}
	names := make([]string, n)
	for i := range names {
		if i < len(known) {
			names[i] = known[i]
		} else {
			names[i] = fmt.Sprintf("customer-%d", i+1)
		}
	}
	return names
}
