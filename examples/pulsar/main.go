// Command pulsar runs a Boulevard pipeline on Apache Pulsar topics.
//
// By default it starts the in-process broker of pulsartest on a loopback
// port, so it needs nothing installed:
//
//	go run ./examples/pulsar
//	go run ./examples/pulsar -n 50000 -concurrency 2 -v
//	go run ./examples/pulsar -http 127.0.0.1:2114 -linger   # metrics and dashboard, kept open after the run
//
// With -url it talks to a real Pulsar instead, for example the standalone
// one of examples/docker-compose.yml:
//
//	docker compose -f examples/docker-compose.yml up -d pulsar
//	go run ./examples/pulsar -url pulsar://127.0.0.1:6650
//
// Either way the program first publishes -n events with a pulsar-client-go
// producer (batched, keyed by customer), then consumes them with the
// Pulsar source. The processors parse each event; every 250th one fails on
// its first delivery and is nacked, so the broker redelivers it after
// -nack-delay and it succeeds the second time. The batcher groups the events
// by customer and the batch handler totals them. When every event has been
// handled the program stops the pipeline (drain, acks, consumer close),
// prints the totals and, on the in-process broker, the permits each
// consumer granted as the broker saw them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/examples/internal/interrupt"
	"github.com/boulevard-go/boulevard/examples/internal/monitor"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// config is what the flags set.
type config struct {
	url          string        // "" = in-process broker
	topic        string        // topic to publish to and consume
	subscription string        // subscription name
	n            int           // events to publish and consume
	customers    int           // distinct keys
	concurrency  int           // producer stages
	nackDelay    time.Duration // redelivery delay of a failed event
	logger       *slog.Logger
	monitor      monitor.Flags // -http and -linger
}

func main() {
	var cfg config
	var verbose bool
	flag.StringVar(&cfg.url, "url", "", "Pulsar service URL (default: start an in-process broker)")
	flag.StringVar(&cfg.topic, "topic", "", "topic (default: a fresh name per run)")
	flag.StringVar(&cfg.subscription, "subscription", "boulevard-example", "subscription name")
	flag.IntVar(&cfg.n, "n", 10000, "number of events to publish and consume")
	flag.IntVar(&cfg.customers, "customers", 5, "number of customers (message keys)")
	flag.IntVar(&cfg.concurrency, "concurrency", 1, fmt.Sprintf("producer stages (one consumer each), 1 to %d", producer.MaxConcurrency))
	flag.DurationVar(&cfg.nackDelay, "nack-delay", time.Second, fmt.Sprintf("redelivery delay of a failed event, above 0 and at most %s", maxNackDelay))
	flag.BoolVar(&verbose, "v", false, "log at debug level to stderr")
	cfg.monitor.Register(flag.CommandLine)
	flag.Parse()
	level := slog.LevelError
	if verbose {
		level = slog.LevelDebug
	}
	cfg.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if cfg.topic == "" {
		cfg.topic = fmt.Sprintf("boulevard-example-%d", time.Now().UnixNano())
	}

	// Ctrl-C or SIGTERM cancels ctx: the program stops publishing, or
	// drains the pipeline, and reports.
	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	if _, err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pulsar example:", err) // run's errors hold no credentials
		os.Exit(1)
	}
}

// result is what a run observed.
type result struct {
	handled     int            // distinct events handled successfully
	duplicates  int            // events handled successfully again (at-least-once redelivery)
	redelivered int            // deliveries with a redelivery count above 0
	failed      int            // deliveries that failed (and were nacked)
	cameBack    int            // failed events handled on a later delivery
	totals      map[string]int // events per customer, from the batch handler
	flows       [][]uint32     // per consumer, the permits the in-process broker saw
}

// maxEvents bounds -n: the run remembers every event it handled.
const maxEvents = 10_000_000

// maxNackDelay bounds -nack-delay: the run waits that long for each
// failed event to come back.
const maxNackDelay = time.Minute

// run publishes cfg.n events, consumes them with a pipeline and reports.
// Its error never shows the user information of cfg.url, and is one line
// (pulsar-client-go's errors may span several): a caller may print it as
// it is.
func run(ctx context.Context, cfg config, out io.Writer) (_ *result, err error) {
	defer func() {
		if err != nil {
			err = redacted(err, cfg.url)
		}
	}()
	if cfg.n < 0 || cfg.n > maxEvents {
		return nil, fmt.Errorf("-n must be 0 to %d, got %d", maxEvents, cfg.n)
	}
	if cfg.customers < 1 {
		return nil, fmt.Errorf("-customers must be ≥ 1, got %d", cfg.customers)
	}
	if cfg.concurrency < 1 || cfg.concurrency > producer.MaxConcurrency {
		return nil, fmt.Errorf("-concurrency must be 1 to %d, got %d", producer.MaxConcurrency, cfg.concurrency)
	}
	// pulsar-client-go takes 0 for its default of one minute and panics on
	// a negative delay.
	if cfg.nackDelay <= 0 || cfg.nackDelay > maxNackDelay {
		return nil, fmt.Errorf("-nack-delay must be above 0 and at most %s, got %s", maxNackDelay, cfg.nackDelay)
	}
	if strings.TrimSpace(cfg.topic) == "" {
		return nil, errors.New("-topic must not be empty")
	}
	if strings.TrimSpace(cfg.subscription) == "" {
		return nil, errors.New("-subscription must not be empty")
	}
	var broker *pulsartest.Broker
	url := cfg.url
	if url == "" {
		// The consumers use batch-index acks: let the broker honour them,
		// as a Pulsar broker with acknowledgmentAtBatchIndexLevelEnabled.
		// StrictBatchPermits keeps every batch within the permits, so the
		// grants printed at the end show the window exactly; a real broker
		// sends whole reads of batches and overshoots them.
		b, err := pulsartest.Start(ctx, pulsartest.Options{Logger: cfg.logger, BatchIndexAck: true, StrictBatchPermits: true})
		if err != nil {
			return nil, err
		}
		defer b.Close()
		broker, url = b, b.URL()
		fmt.Fprintf(out, "in-process Pulsar broker at %s\n", url)
	}
	// NewClient bounds connect and operation times, and logs the client's
	// own lines through cfg.logger with the URL's password redacted.
	client, err := bpulsar.NewClient(pulsar.ClientOptions{URL: url}, cfg.logger)
	if err != nil {
		return nil, err
	}
	// The client outlives the pipeline: the source shares it, never closes it.
	defer client.Close()

	published, err := publish(ctx, client, cfg)
	if err != nil {
		return nil, fmt.Errorf("publish to %s: %w", bpulsar.RedactServiceURL(url), err)
	}
	if published < cfg.n && ctx.Err() == nil {
		return nil, fmt.Errorf("publish to %s: the broker acknowledged %d of %d events", bpulsar.RedactServiceURL(url), published, cfg.n)
	}
	if published < cfg.n {
		fmt.Fprintf(out, "interrupted while publishing: published %d of %d events to %s, consumed none\n", published, cfg.n, cfg.topic)
		return &result{totals: map[string]int{}}, nil
	}
	fmt.Fprintf(out, "published %d events to %s\n", cfg.n, cfg.topic)

	res := &result{totals: map[string]int{}}
	var (
		mu      sync.Mutex
		seen    = make(map[int]bool, min(cfg.n, 1<<16))
		all     = make(chan struct{})
		handled atomic.Int64
	)
	if cfg.n == 0 {
		close(all) // nothing to wait for
	}
	handle := func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		md, _ := message.MetadataAs[*bpulsar.Metadata](m)
		customer, seq, err := parse(m.Data)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if md.RedeliveryCount > 0 {
			res.redelivered++
		}
		if seq%250 == 0 && md.RedeliveryCount == 0 {
			res.failed++
			return nil, fmt.Errorf("event %d: simulated transient failure", seq) // nacked, redelivered
		}
		if seen[seq] {
			// Delivery is at least once: a nacked message of a batch can
			// bring back siblings whose acks had not reached the broker yet.
			res.duplicates++
			m.SetBatchKey(duplicateKey)
			return m.Data, nil
		}
		seen[seq] = true
		if seq%250 == 0 {
			res.cameBack++
		}
		m.SetBatchKey(customer)
		if handled.Add(1) == int64(cfg.n) {
			close(all)
		}
		return m.Data, nil
	}
	totalBatch := func(_ context.Context, batch []*message.Message[[]byte], info message.BatchInfo) error {
		if info.BatchKey == duplicateKey {
			return nil
		}
		mu.Lock()
		res.totals[info.BatchKey] += len(batch)
		mu.Unlock()
		return nil
	}

	src := bpulsar.New(bpulsar.Options{
		Client:       client,
		Topics:       []string{cfg.topic},
		Subscription: cfg.subscription,
		Consumer: pulsar.ConsumerOptions{
			SubscriptionInitialPosition:    pulsar.SubscriptionPositionEarliest,
			NackRedeliveryDelay:            cfg.nackDelay,
			EnableBatchIndexAcknowledgment: true,
		},
	})
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:       "pulsar-example",
		Logger:     cfg.logger,
		Producer:   producer.Options[[]byte]{Source: src, Concurrency: cfg.concurrency},
		Processors: processor.Options[[]byte, []byte]{Handle: handle},
		Batchers:   []batcher.Options[[]byte]{{Name: "default", BatchSize: 100, BatchTimeout: 100 * time.Millisecond, Handle: totalBatch}},
	})
	if err != nil {
		return nil, err
	}
	obs := observe.New(observe.Options{})
	// Adding is setup, not the work an interrupt stops: StatsTimeout bounds it.
	if err := obs.Add(context.WithoutCancel(ctx), p); err != nil {
		return nil, err
	}
	if err := obs.AddPulsar(cfg.subscription, src); err != nil {
		return nil, err
	}
	srv, err := cfg.monitor.Serve(ctx, obs, out)
	if err != nil {
		return nil, err
	}
	defer srv.Close(ctx) // after the report, for as long as -linger says
	start := time.Now()
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	select {
	case <-all:
	case <-ctx.Done():
	case <-p.Done():
	}
	elapsed := time.Since(start)
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Stop(stopCtx); err != nil {
		return nil, fmt.Errorf("stop: %w", err)
	}
	res.handled = int(handled.Load())
	if broker != nil {
		for _, c := range broker.Consumers(cfg.topic, cfg.subscription) {
			res.flows = append(res.flows, c.Flows)
		}
	}
	report(out, res, elapsed, src.Stats())
	if res.handled < cfg.n && ctx.Err() != nil {
		fmt.Fprintf(out, "interrupted: %d of %d events not handled; they stay in subscription %q\n", cfg.n-res.handled, cfg.n, cfg.subscription)
	}
	if res.handled < cfg.n && ctx.Err() == nil {
		return res, errors.New("stopped before every event was handled")
	}
	return res, nil
}

// redactedError is an error whose message has the credentials taken out;
// it unwraps to the error it was made from, for errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redacted returns err, or, when its message shows user information (of
// serviceURL, or of any URL in it) or spans several lines, err with that
// message redacted and its lines joined by "; ". serviceURL is replaced
// whole first, so that a password RedactURL cannot delimit (a raw "/" in
// it) is hidden too.
func redacted(err error, serviceURL string) error {
	msg := strings.ReplaceAll(strings.TrimRight(err.Error(), "\n"), "\n", "; ")
	if serviceURL != "" {
		msg = strings.ReplaceAll(msg, serviceURL, bpulsar.RedactServiceURL(serviceURL))
	}
	msg = bpulsar.RedactURL(msg)
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// duplicateKey is the batch key of events handled a second time.
const duplicateKey = "duplicate"

// flushGrace bounds how long an interrupted publish waits for the events
// it already handed to the client.
const flushGrace = 5 * time.Second

// publish sends cfg.n events "customer-K:SEQ", keyed by customer, batched,
// and returns how many the broker acknowledged. When ctx ends it stops
// sending and returns the count so far with a nil error: the events already
// handed to the client get flushGrace to reach the broker, so that the
// client does not fail them (with an ERROR line of its own) the moment
// the user presses Ctrl-C.
func publish(ctx context.Context, client pulsar.Client, cfg config) (int, error) {
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: cfg.topic, SendTimeout: -1})
	if err != nil {
		return 0, err
	}
	defer prod.Close()
	// sendCtx ends flushGrace after ctx does, or when publish returns.
	sendCtx, cancelSend := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSend()
	stopGrace := context.AfterFunc(ctx, func() {
		t := time.NewTimer(flushGrace)
		defer t.Stop()
		select {
		case <-t.C:
			cancelSend()
		case <-sendCtx.Done():
		}
	})
	defer stopGrace()
	var published, completed atomic.Int64
	answered := make(chan struct{}, 1) // a callback ran
	errs := make(chan error, 1)
	sent := 0
	for i := range cfg.n {
		if ctx.Err() != nil {
			break // interrupted: stop sending
		}
		customer := fmt.Sprintf("customer-%d", i%cfg.customers)
		sent++
		prod.SendAsync(sendCtx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%s:%d", customer, i), Key: customer},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err == nil {
					published.Add(1)
				} else {
					select {
					case errs <- err:
					default:
					}
				}
				completed.Add(1)
				select {
				case answered <- struct{}{}:
				default:
				}
			})
	}
	// Flush sends what the client still batches; the callbacks may run
	// after it returns, so wait for every one of them too.
	if err := prod.FlushWithCtx(sendCtx); err != nil && ctx.Err() == nil {
		return int(published.Load()), err
	}
	for completed.Load() < int64(sent) {
		select {
		case <-answered:
		case <-sendCtx.Done(): // only after ctx: interrupted, and the grace is over
			return int(published.Load()), nil
		}
	}
	select {
	case err := <-errs:
		if ctx.Err() == nil {
			return int(published.Load()), err
		}
	default:
	}
	return int(published.Load()), nil
}

// parse splits "customer-K:SEQ".
func parse(b []byte) (customer string, seq int, err error) {
	c, s, ok := strings.Cut(string(b), ":")
	if !ok {
		return "", 0, fmt.Errorf("malformed event %q", b)
	}
	seq, err = strconv.Atoi(s)
	return c, seq, err
}

func report(out io.Writer, res *result, elapsed time.Duration, st bpulsar.Stats) {
	fmt.Fprintf(out, "handled %d events in %s (%.0f/s); %d failed once, %d came back (%d redeliveries, %d duplicates)\n",
		res.handled, elapsed.Round(time.Millisecond), float64(res.handled)/elapsed.Seconds(), res.failed, res.cameBack, res.redelivered, res.duplicates)
	keys := make([]string, 0, len(res.totals))
	for k := range res.totals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(out, "  %-12s %d\n", k, res.totals[k])
	}
	fmt.Fprintf(out, "source: %d consumers replaced, %d outcomes dropped\n", st.Replaced, st.DroppedAcks)
	for i, f := range res.flows {
		shown := f
		if len(shown) > 8 {
			shown = shown[:8]
		}
		fmt.Fprintf(out, "consumer %d permits at the broker: %v… (%d grants)\n", i, shown, len(f))
	}
}
