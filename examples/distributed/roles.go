package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/examples/internal/monitor"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/topic/connector"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/topic/sink"
	"github.com/boulevard-go/boulevard/topic/source"
)

// The environment a child process reads its role and settings from.
const (
	roleEnv    = "BOULEVARD_DISTRIBUTED_ROLE"
	backendEnv = "BOULEVARD_DISTRIBUTED_BACKEND"
	addrEnv    = "BOULEVARD_DISTRIBUTED_ADDR"
	ordersEnv  = "BOULEVARD_DISTRIBUTED_ORDERS"
	verboseEnv = "BOULEVARD_DISTRIBUTED_VERBOSE"
	httpEnv    = "BOULEVARD_DISTRIBUTED_HTTP"
)

// Order is the payload every topic carries, as JSON.
type Order struct {
	ID     int    `json:"id"`
	Amount int    `json:"amount"`
	Region string `json:"region,omitempty"`
}

// wiring is examples/topics' wiring, with archive and fraud as consumer
// groups of audit: on a log, a group resumes where it stopped, so a
// restarted archive process misses nothing.
var wiring = config.Wiring{Pipelines: []config.Pipeline{
	{Name: "ingest", Publishes: []config.Publish{{Topic: "orders"}}},
	{Name: "enrich",
		Subscribes: []config.Subscribe{{Topic: "orders", ConsumerGroup: "enrichers"}},
		Publishes:  []config.Publish{{Topic: "audit"}}},
	{Name: "archive", Subscribes: []config.Subscribe{{Topic: "audit", ConsumerGroup: "archive"}}},
	{Name: "fraud", Subscribes: []config.Subscribe{{Topic: "audit", ConsumerGroup: "fraud"}}},
}}

// document is the topic document every process loads: both topics on the
// one connection, given as a flag or by the coordinator's in-process broker.
func document(backend, addr string) []byte {
	conn := "kind: kafka\n    brokers: [" + strconv.Quote(addr) + "]"
	if backend == "pulsar" {
		conn = "kind: pulsar\n    service_url: " + strconv.Quote(addr)
	}
	return []byte(`
defaults:
  backend: ` + backend + `
  connection: cluster
connections:
  cluster:
    ` + conn + `
topics:
  orders:
    policies:
      balanced: {queue_capacity: 16}   # each member's read-ahead
  audit: {}
`)
}

// childCfg is what a child process is told through its environment.
type childCfg struct {
	backend, addr string
	orders        int
	log           *slog.Logger
	http          string // where to serve this process's metrics and dashboard, "" for nowhere
}

func childConfig() childCfg {
	n, _ := strconv.Atoi(os.Getenv(ordersEnv))
	c := childCfg{backend: os.Getenv(backendEnv), addr: os.Getenv(addrEnv), orders: n, log: slog.New(slog.DiscardHandler),
		http: os.Getenv(httpEnv)}
	if os.Getenv(verboseEnv) != "" {
		c.log = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("process", os.Getenv(roleEnv))
	}
	return c
}

// lineWriter writes whole lines to out, one at a time.
type lineWriter struct {
	mu  sync.Mutex
	out io.Writer
}

func (w *lineWriter) printf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(w.out, format+"\n", args...)
}

// runRole runs the pipeline of one process (role "ingest", "archive",
// "fraud" or "enrich-<n>") until ctx ends, or, for ingest, until every
// order is published. It prints "ready <role>" once it is subscribed and
// one line per order it handles.
func runRole(ctx context.Context, out io.Writer, role string, c childCfg) error {
	w := &lineWriter{out: out}
	connect, err := connector.New(connector.Options[Order]{
		Codec:  topic.JSONCodec[Order]{},
		Logger: c.log,
		Kafka: func(_ config.ConnectionSpec, o *kafkatopic.Options[Order]) {
			o.Partitions = 4 // room for both enrich processes
			// Notice a killed member within seconds, not the default 10s.
			o.Config.Consumer.Group.Session.Timeout = 3 * time.Second
			o.Config.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
			o.Config.Consumer.Group.Rebalance.Retry.Backoff = 200 * time.Millisecond
			o.Config.Consumer.MaxWaitTime = 100 * time.Millisecond
		},
	})
	if err != nil {
		return err
	}
	broker := topic.NewBroker[Order]()
	defer broker.Close()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	wired, err := config.LoadContext(lctx, document(c.backend, c.addr), wiring, broker, config.BuildOptions[Order]{Connect: connect})
	cancel()
	if err != nil {
		return err
	}
	defer func() { _ = wired.Close(context.Background()) }()
	obs := observe.New(observe.Options{})
	srv, err := monitor.Flags{HTTP: c.http}.Serve(ctx, obs, out)
	if err != nil {
		return err
	}
	defer srv.Close(ctx)
	name, _, _ := strings.Cut(role, "-")
	switch name {
	case "ingest":
		return ingest(ctx, w, wired, c, obs)
	case "enrich":
		return enrich(ctx, w, wired, role, c, obs)
	case "archive", "fraud":
		return check(ctx, w, wired, name, c, obs)
	}
	return fmt.Errorf("unknown role %q", role)
}

// ingest publishes orders 1..n into orders and returns once the broker has
// stored every one.
func ingest(ctx context.Context, w *lineWriter, wired *config.Wired[Order], c childCfg, obs *observe.Observer) error {
	b, _ := wired.Publisher("ingest", "orders")
	out, err := sink.New(sink.Options[Order]{Binding: b, Logger: c.log})
	if err != nil {
		return err
	}
	var stored atomic.Int64
	p, err := pipeline.New(pipeline.Options[Order, Order]{
		Name: "ingest", Logger: c.log,
		Drainers:   []pipeline.Drainer{out},
		Producer:   producer.Options[Order]{Source: &generator{n: c.orders, ack: counter{&stored}}},
		Processors: processor.Options[Order, Order]{Concurrency: 2, Handle: out.Handler()},
	})
	if err != nil {
		return err
	}
	// Adding is setup, not the work an interrupt stops: StatsTimeout bounds it.
	if err := obs.Add(context.WithoutCancel(ctx), p); err != nil {
		return err
	}
	w.printf("ready ingest")
	if err := p.Run(ctx); err != nil {
		return err
	}
	w.printf("ingest published %d orders", stored.Load())
	if c.http != "" {
		<-ctx.Done() // keep serving the finished run until the coordinator stops the processes
	}
	return nil
}

// enrich reads orders as a member of group "enrichers" and publishes each
// order, with its region, into audit.
func enrich(ctx context.Context, w *lineWriter, wired *config.Wired[Order], role string, c childCfg, obs *observe.Observer) error {
	subs := wired.Subscriptions("enrich")
	src, err := source.NewContext(ctx, source.Options[Order]{Topic: subs[0].Binding.Handle, Mode: subs[0].Mode, Logger: c.log})
	if err != nil {
		return err
	}
	b, _ := wired.Publisher("enrich", "audit")
	audit, err := sink.New(sink.Options[Order]{Binding: b, Logger: c.log})
	if err != nil {
		return err
	}
	p, err := pipeline.New(pipeline.Options[Order, Order]{
		Name: "enrich", Logger: c.log,
		Drainers: []pipeline.Drainer{audit},
		Producer: producer.Options[Order]{Source: src},
		Processors: processor.Options[Order, Order]{Concurrency: 2, Handle: func(ctx context.Context, m *message.Message[Order]) (Order, error) {
			m.Data.Region = []string{"north", "south", "east"}[m.Data.ID%3]
			if err := audit.Publish(ctx, m); err != nil {
				return m.Data, err
			}
			w.printf("%s handled order %d", role, m.Data.ID)
			return m.Data, nil
		}},
	})
	if err != nil {
		return err
	}
	if err := obs.Add(context.WithoutCancel(ctx), p); err != nil {
		return err
	}
	w.printf("ready %s", role)
	return p.Run(ctx)
}

var errSuspicious = errors.New("suspicious amount")

// check is archive or fraud: a consumer group of audit. fraud rejects
// orders above 900; a rejection is final (acked as handled: the order is
// not retried), as a real fraud check's verdict would be.
func check(ctx context.Context, w *lineWriter, wired *config.Wired[Order], name string, c childCfg, obs *observe.Observer) error {
	subs := wired.Subscriptions(name)
	src, err := source.NewContext(ctx, source.Options[Order]{Topic: subs[0].Binding.Handle, Mode: subs[0].Mode, Logger: c.log})
	if err != nil {
		return err
	}
	p, err := pipeline.New(pipeline.Options[Order, Order]{
		Name: name, Logger: c.log,
		Producer: producer.Options[Order]{Source: src},
		Processors: processor.Options[Order, Order]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[Order]) (Order, error) {
			verdict := "ok"
			if name == "fraud" && m.Data.Amount > 900 {
				verdict = "rejected: " + errSuspicious.Error()
			}
			w.printf("%s handled order %d %s %s", name, m.Data.ID, m.Data.Region, verdict)
			return m.Data, nil
		}},
	})
	if err != nil {
		return err
	}
	if err := obs.Add(context.WithoutCancel(ctx), p); err != nil {
		return err
	}
	w.printf("ready %s", name)
	return p.Run(ctx)
}

// generator delivers orders 1..n under its feed's permits and then ends:
// the pipeline drains and stops when everything is handled.
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
			feed.Deliver(message.New(Order{ID: id, Amount: id * 37 % 1000}, g.ack, uint64(id)))
			id++
		}
	}
	return nil
}

// counter counts the orders the broker stored (acker.Acknowledger).
type counter struct{ n *atomic.Int64 }

func (c counter) Ack(_ context.Context, successful, _ []acker.Outcome) {
	c.n.Add(int64(len(successful)))
}
