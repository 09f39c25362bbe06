package pipeline

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/boulevard-go/boulevard/producer"
)

// Topology describes a pipeline's stages as they were configured, defaults
// applied, except for the rate limit, which is the one in force when
// Topology was called.
type Topology struct {
	// Name is the pipeline's name.
	Name string
	// Producer describes the producer stages.
	Producer ProducerTopology
	// Processors describes the processors.
	Processors ProcessorTopology
	// Batchers describes the batchers, in declaration order.
	Batchers []BatcherTopology
}

// ProducerTopology describes the producer stages.
type ProducerTopology struct {
	// Stages are the producer stages' names (none for a push-only pipeline).
	Stages []string
	// Source is the source's Go type, or "" for a push-only pipeline.
	Source string
	// Flow is every feed's permit window.
	Flow producer.Flow
	// RateLimit is the rate limit in force (the configured one, or the
	// last one Pipeline.SetRateLimit set), or nil when there is none.
	RateLimit *producer.RateLimit
}

// ProcessorTopology describes the processors.
type ProcessorTopology struct {
	// Name is the stage's name, "<pipeline>.processor".
	Name string
	// Concurrency is the number of processors.
	Concurrency int
	// MaxDemand is the largest demand of a processor; MinDemand what it
	// keeps in reserve: it takes chunks of at most MaxDemand − MinDemand
	// messages (GenStage's max_demand and min_demand).
	MaxDemand int
	// MinDemand is the processors' MinDemand (0 by default).
	MinDemand int
	// Partitioned reports whether PartitionBy is set.
	Partitioned bool
	// QueueCapacity is the capacity of each processor's queue (of the one
	// shared queue when not partitioned): Processors.QueueCapacity when
	// set, otherwise at least the producer's permit window, so that a
	// delivery usually goes straight to the processors.
	QueueCapacity int
}

// BatcherTopology describes one batcher.
type BatcherTopology struct {
	// Name is the batcher's name.
	Name string
	// Stage is the stage's name, "<pipeline>.batcher.<name>".
	Stage string
	// BatchSize is the size trigger.
	BatchSize int
	// MaxWeight is the weight trigger: the largest total weight of a
	// batch; 0 when the batcher has no weight rule.
	MaxWeight int
	// BatchTimeout is the timeout trigger.
	BatchTimeout time.Duration
	// MaxDemand is how many messages a batcher partition takes from its
	// queue at once.
	MaxDemand int
	// Concurrency is the number of batch processors.
	Concurrency int
	// Partitioned reports whether PartitionBy is set.
	Partitioned bool
	// QueueCapacity is the capacity of each batcher partition's input
	// queue, in messages (the batcher's QueueCapacity when set).
	QueueCapacity int
	// BatchQueueCapacity is the capacity of each queue of batches waiting
	// for a batch processor (of the one shared queue when not
	// partitioned), in batches (the batcher's BatchQueueCapacity when
	// set).
	BatchQueueCapacity int
}

// Topology describes the pipeline's stages.
func (p *Pipeline[In, Out]) Topology() Topology {
	if !p.built() {
		return Topology{}
	}
	o := &p.opts
	t := Topology{
		Name: o.Name,
		Producer: ProducerTopology{
			Flow:      o.Producer.Flow,
			RateLimit: p.prod.RateLimit(),
		},
		Processors: ProcessorTopology{
			Name:          p.proc.Name(),
			Concurrency:   o.Processors.Concurrency,
			MaxDemand:     o.Processors.MaxDemand,
			MinDemand:     o.Processors.MinDemand,
			Partitioned:   o.Processors.PartitionBy != nil,
			QueueCapacity: p.proc.QueueCapacity(),
		},
	}
	if o.Producer.Source != nil {
		t.Producer.Source = fmt.Sprintf("%T", o.Producer.Source)
	}
	for _, s := range p.prod.Stages() {
		t.Producer.Stages = append(t.Producer.Stages, s.Name())
	}
	for i, b := range o.Batchers {
		t.Batchers = append(t.Batchers, BatcherTopology{
			Name:               b.Name,
			Stage:              p.batchers[i].StageName(),
			BatchSize:          b.BatchSize,
			MaxWeight:          b.MaxWeight,
			BatchTimeout:       b.BatchTimeout,
			MaxDemand:          b.MaxDemand,
			Concurrency:        b.Concurrency,
			Partitioned:        b.PartitionBy != nil,
			QueueCapacity:      p.batchers[i].QueueCapacity(),
			BatchQueueCapacity: p.batchers[i].BatchQueueCapacity(),
		})
	}
	return t
}

// String renders the topology as an indented tree, one stage per line.
func (t Topology) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline %s\n", t.Name)
	if len(t.Producer.Stages) == 0 {
		b.WriteString("  producer: none (push only)\n")
	} else {
		fmt.Fprintf(&b, "  producer: %d stage(s) of %s, flow %d/%d/%d",
			len(t.Producer.Stages), t.Producer.Source, t.Producer.Flow.Initial, t.Producer.Flow.Threshold, t.Producer.Flow.Refill)
		if rl := t.Producer.RateLimit; rl != nil {
			fmt.Fprintf(&b, ", rate limit %d per %s", rl.Allowed, rl.Interval)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "  processors: %d, max demand %d", t.Processors.Concurrency, t.Processors.MaxDemand)
	if t.Processors.MinDemand > 0 {
		fmt.Fprintf(&b, ", min demand %d", t.Processors.MinDemand)
	}
	fmt.Fprintf(&b, ", queue %d", t.Processors.QueueCapacity)
	if t.Processors.Partitioned {
		b.WriteString(", partitioned")
	}
	b.WriteString("\n")
	for _, bt := range t.Batchers {
		fmt.Fprintf(&b, "  batcher %s: size %d", bt.Name, bt.BatchSize)
		if bt.MaxWeight > 0 {
			fmt.Fprintf(&b, ", max weight %d", bt.MaxWeight)
		}
		fmt.Fprintf(&b, ", timeout %s, max demand %d, %d batch processor(s), queue %d, batch queue %d",
			bt.BatchTimeout, bt.MaxDemand, bt.Concurrency, bt.QueueCapacity, bt.BatchQueueCapacity)
		if bt.Partitioned {
			b.WriteString(", partitioned")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// LogValue renders the topology as structured attributes for log/slog.
func (t Topology) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("name", t.Name),
		slog.Int("producer_stages", len(t.Producer.Stages)),
		slog.String("flow", fmt.Sprintf("%d/%d/%d", t.Producer.Flow.Initial, t.Producer.Flow.Threshold, t.Producer.Flow.Refill)),
		slog.Int("processors", t.Processors.Concurrency),
		slog.Int("max_demand", t.Processors.MaxDemand),
	}
	if t.Processors.MinDemand > 0 {
		attrs = append(attrs, slog.Int("min_demand", t.Processors.MinDemand))
	}
	attrs = append(attrs, slog.Int("queue_capacity", t.Processors.QueueCapacity))
	if rl := t.Producer.RateLimit; rl != nil {
		attrs = append(attrs, slog.String("rate_limit", fmt.Sprintf("%d per %s", rl.Allowed, rl.Interval)))
	}
	for _, b := range t.Batchers {
		battrs := []any{slog.Int("batch_size", b.BatchSize)}
		if b.MaxWeight > 0 {
			battrs = append(battrs, slog.Int("max_weight", b.MaxWeight))
		}
		battrs = append(battrs,
			slog.Duration("batch_timeout", b.BatchTimeout),
			slog.Int("max_demand", b.MaxDemand),
			slog.Int("concurrency", b.Concurrency),
			slog.Int("queue_capacity", b.QueueCapacity),
			slog.Int("batch_queue_capacity", b.BatchQueueCapacity))
		attrs = append(attrs, slog.Group("batcher_"+b.Name, battrs...))
	}
	return slog.GroupValue(attrs...)
}
