package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/topic/sink"
	"github.com/boulevard-go/boulevard/topic/source"
)

// topicsYAML declares the two topics. Their modes are not written down:
// they are inferred from the wiring (orders: one balanced group, so
// balanced_only; audit: broadcast subscribers only, so broadcast_only).
const topicsYAML = `
topics:
  orders:
    policies:
      balanced:
        queue_capacity: 64
        on_full: block
      ack_propagation:
        mode: auto
        max_in_flight: 32
        timeout: 5s
  audit:
    policies:
      broadcast:
        queue_capacity: 256
        on_lag: disconnect
        ack_mode: all
      ack_propagation:
        mode: auto
        timeout: 5s
`

// wiring says who subscribes to and publishes into which topic.
var wiring = config.Wiring{Pipelines: []config.Pipeline{
	{Name: "ingest", Publishes: []config.Publish{{Topic: "orders"}}},
	{Name: "enrich",
		Subscribes: []config.Subscribe{{Topic: "orders", ConsumerGroup: "enrichers"}},
		Publishes:  []config.Publish{{Topic: "audit"}}},
	{Name: "archive", Subscribes: []config.Subscribe{{Topic: "audit", Mode: config.Broadcast}}},
	{Name: "fraud", Subscribes: []config.Subscribe{{Topic: "audit", Mode: config.Broadcast}}},
}}

// Order is the payload every topic carries.
type Order struct {
	// ID numbers the orders from 1.
	ID int
	// Amount is what the order is worth; fraud rejects more than 900.
	Amount int
	// Region is set by enrich.
	Region string
}

// errSuspicious is fraud's reason for rejecting an order.
var errSuspicious = errors.New("suspicious amount")

// run wires the pipelines, ingests n orders, waits for every outcome, stops
// the pipelines upstream first and reports to out.
func run(ctx context.Context, out io.Writer, log *slog.Logger, n int) error {
	return runObserved(ctx, out, log, n, nil)
}

// maxOrders is the largest -orders: the report prints a line per order.
const maxOrders = 100_000

// runObserved is run with every pipeline and topic added to obs, when it
// is not nil, before anything starts.
func runObserved(ctx context.Context, out io.Writer, log *slog.Logger, n int, obs *observe.Observer) error {
	if n < 0 || n > maxOrders {
		return fmt.Errorf("-orders must be 0 to %d, got %d", maxOrders, n)
	}
	broker := topic.NewBroker[Order]()
	defer broker.Close()
	wired, err := config.Load([]byte(topicsYAML), wiring, broker)
	if err != nil {
		return err
	}
	if obs != nil {
		for _, name := range slices.Sorted(maps.Keys(wired.Topics)) {
			if err := obs.AddTopic(string(name), wired.Topics[name]); err != nil {
				return err
			}
		}
		links := map[topic.Name]*observe.TopicLinks{}
		for _, pp := range wired.Plan.Pipelines {
			for _, b := range pp.Bindings {
				l := links[b.Topic]
				if l == nil {
					l = &observe.TopicLinks{}
					links[b.Topic] = l
				}
				if b.Role == config.Publisher {
					l.Publishers = append(l.Publishers, pp.Name)
				} else {
					l.Subscribers = append(l.Subscribers, pp.Name)
				}
			}
		}
		for name, l := range links {
			obs.LinkTopic(string(name), *l)
		}
	}
	fmt.Fprintln(out, "topics:")
	for _, tp := range wired.Plan.Topics {
		var subs []string
		for _, g := range tp.BalancedGroups {
			subs = append(subs, "group "+string(g))
		}
		for _, b := range tp.Broadcasters {
			subs = append(subs, "broadcast "+b)
		}
		fmt.Fprintf(out, "  %-7s %-15s ack_mode=%-5s propagation=%s  publishers=%s  subscribers=%s\n",
			tp.Name, tp.Options.Mode, tp.Options.Broadcast.AckMode, tp.Options.AckPropagation.Mode,
			strings.Join(tp.Publishers, ","), strings.Join(subs, ", "))
	}

	// Start the downstream pipelines first, so that they are subscribed
	// before anything is published (there is no replay), and stop them
	// last.
	var stops []func() error
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			_ = stops[i]()
		}
	}()
	start := func(p interface {
		Start(context.Context) error
		Stop(context.Context) error
		Stats() pipeline.Stats
	}) error {
		if obs != nil {
			// Adding is setup, not the work an interrupt stops: StatsTimeout bounds it.
			if err := obs.Add(context.WithoutCancel(ctx), p); err != nil {
				return err
			}
		}
		if err := p.Start(ctx); err != nil {
			return err
		}
		stops = append(stops, func() error { return p.Stop(context.WithoutCancel(ctx)) })
		return nil
	}
	var mu sync.Mutex
	archived := 0
	for _, name := range []string{"fraud", "archive"} {
		src, err := subscriber(wired, name, log)
		if err != nil {
			return err
		}
		handle := func(_ context.Context, m *message.Message[Order]) (Order, error) {
			mu.Lock()
			archived++
			mu.Unlock()
			return m.Data, nil
		}
		if name == "fraud" {
			handle = func(_ context.Context, m *message.Message[Order]) (Order, error) {
				if m.Data.Amount > 900 {
					return m.Data, fmt.Errorf("order %d: %w", m.Data.ID, errSuspicious)
				}
				return m.Data, nil
			}
		}
		p, err := pipeline.New(pipeline.Options[Order, Order]{
			Name: name, Logger: log,
			Producer:   producer.Options[Order]{Source: src},
			Processors: processor.Options[Order, Order]{Concurrency: 2, Handle: handle},
		})
		if err != nil {
			return err
		}
		if err := start(p); err != nil {
			return err
		}
	}

	// enrich reads orders (two group members) and publishes into audit; it
	// drains its audit sink before closing its source, so that stopping it
	// waits for audit's outcomes.
	ordersSrc, err := subscriber(wired, "enrich", log)
	if err != nil {
		return err
	}
	auditSink, err := publisher(wired, "enrich", "audit", log)
	if err != nil {
		return err
	}
	enrich, err := pipeline.New(pipeline.Options[Order, Order]{
		Name: "enrich", Logger: log,
		Drainers: []pipeline.Drainer{auditSink},
		Producer: producer.Options[Order]{Source: ordersSrc, Concurrency: 2},
		Processors: processor.Options[Order, Order]{Concurrency: 2, Handle: func(ctx context.Context, m *message.Message[Order]) (Order, error) {
			m.Data.Region = []string{"north", "south", "east"}[m.Data.ID%3]
			return m.Data, auditSink.Publish(ctx, m)
		}},
	})
	if err != nil {
		return err
	}
	if err := start(enrich); err != nil {
		return err
	}

	// ingest generates the orders; its acknowledger is the ledger.
	ledger := newLedger()
	ordersSink, err := publisher(wired, "ingest", "orders", log)
	if err != nil {
		return err
	}
	ingest, err := pipeline.New(pipeline.Options[Order, Order]{
		Name: "ingest", Logger: log,
		Drainers:   []pipeline.Drainer{ordersSink},
		Producer:   producer.Options[Order]{Source: &generator{n: n, ack: ledger}},
		Processors: processor.Options[Order, Order]{Concurrency: 2, Handle: ordersSink.Handler()},
	})
	if err != nil {
		return err
	}
	if err := start(ingest); err != nil {
		return err
	}

	if err := ledger.wait(ctx, n); err != nil {
		return err
	}
	// Stop upstream first: each pipeline drains its sink (waits for the
	// downstream outcomes) before it closes its source.
	for i := len(stops) - 1; i >= 0; i-- {
		if err := stops[i](); err != nil {
			return err
		}
	}
	stops = nil

	fmt.Fprintf(out, "\ningest's source saw %d outcomes:\n", n)
	for _, line := range ledger.lines() {
		fmt.Fprintln(out, "  "+line)
	}
	mu.Lock()
	fmt.Fprintf(out, "\narchive handled %d orders\n", archived)
	mu.Unlock()
	srcStats, sinkStats := ordersSrc.Stats(), auditSink.Stats()
	fmt.Fprintf(out, "enrich: received %d from orders (acked %d, nacked %d); published %d into audit (acked %d, failed %d)\n",
		srcStats.Received, srcStats.Acked, srcStats.Nacked, sinkStats.Published, sinkStats.Acked, sinkStats.Failed)
	for _, name := range []topic.Name{"orders", "audit"} {
		h := wired.Topics[name]
		st := h.Stats()
		fmt.Fprintf(out, "topic %s: published %d, dropped %d, lagged %d, in flight %d\n", name, st.Published, st.Dropped, st.Lagged, st.InFlight)
	}
	return nil
}

// subscriber makes the topic source of a pipeline's (only) subscription.
func subscriber(w *config.Wired[Order], pipeline string, log *slog.Logger) (*source.Source[Order], error) {
	subs := w.Subscriptions(pipeline)
	if len(subs) != 1 {
		return nil, fmt.Errorf("pipeline %s has %d subscriptions, want 1", pipeline, len(subs))
	}
	return source.New(source.Options[Order]{Topic: subs[0].Binding.Handle, Mode: subs[0].Mode, Logger: log})
}

// publisher makes the sink of a pipeline's binding of a topic.
func publisher(w *config.Wired[Order], pipeline, alias string, log *slog.Logger) (*sink.Sink[Order], error) {
	b, ok := w.Publisher(pipeline, alias)
	if !ok {
		return nil, fmt.Errorf("pipeline %s does not publish into %s", pipeline, alias)
	}
	return sink.New(sink.Options[Order]{Binding: b, Logger: log})
}

// generator delivers orders 1..n under its feed's permits, then waits until
// the pipeline stops it.
type generator struct {
	producer.Basic
	n   int
	ack acker.Acknowledger
}

// Run delivers the orders (producer.Source).
func (g *generator) Run(ctx context.Context, st *producer.Stage[Order]) error {
	feed := st.NewFeed("generator", nil)
	for id := 1; id <= g.n; {
		k, err := feed.Acquire(ctx, g.n-id+1)
		if err != nil {
			return nil
		}
		for range k {
			feed.Deliver(message.New(Order{ID: id, Amount: id * 100}, g.ack, uint64(id)))
			id++
		}
	}
	<-ctx.Done()
	return nil
}

// ledger is ingest's acknowledger: it keeps each order's outcome.
type ledger struct {
	mu      sync.Mutex
	results map[uint64]error
	changed chan struct{}
}

func newLedger() *ledger {
	return &ledger{results: map[uint64]error{}, changed: make(chan struct{}, 1)}
}

// Ack records the outcomes (acker.Acknowledger).
func (l *ledger) Ack(_ context.Context, successful, failed []acker.Outcome) {
	l.mu.Lock()
	for _, o := range successful {
		l.results[o.ID] = nil
	}
	for _, o := range failed {
		l.results[o.ID] = o.Err
	}
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// wait waits until the outcomes of n orders are in. When ctx ends first
// (Ctrl-C, SIGTERM, the run's deadline), the error says how many were in.
func (l *ledger) wait(ctx context.Context, n int) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		l.mu.Lock()
		done := len(l.results) >= n
		l.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-l.changed:
		case <-t.C:
		case <-ctx.Done():
			l.mu.Lock()
			in := len(l.results)
			l.mu.Unlock()
			return fmt.Errorf("waiting for the orders' outcomes (%d of %d in): %w", in, n, ctx.Err())
		}
	}
}

func (l *ledger) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]uint64, 0, len(l.results))
	for id := range l.results {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if err := l.results[id]; err != nil {
			out = append(out, fmt.Sprintf("order %2d failed: %v", id, err))
		} else {
			out = append(out, fmt.Sprintf("order %2d acked", id))
		}
	}
	return out
}
