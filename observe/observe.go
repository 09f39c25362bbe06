// Package observe exposes running pipelines to operators: a Prometheus
// collector built from Pipeline.Stats snapshots (and from the stats of the
// Kafka sources and topics registered with it), and one http.Handler
// serving /metrics, /healthz and /readyz.
//
// Nothing is registered globally: the caller registers the Observer on the
// prometheus.Registerer of its choice, and mounts the Handler on its own
// server. Collecting reads the snapshots only when Prometheus scrapes, so
// the message path pays nothing for it beyond the counters the stages keep
// anyway.
//
//	obs := observe.New(observe.Options{})
//	obs.Add(p) // any *pipeline.Pipeline
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(obs)
//	http.Handle("/", obs.Handler(reg))
package observe

import (
	"cmp"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/topic"
)

// Pipeline is what the Observer reads of a pipeline: every
// *pipeline.Pipeline implements it, whatever its payload types.
type Pipeline interface {
	Stats() pipeline.Stats
}

// KafkaSource is what the Observer reads of a Kafka source: *kafka.Source
// implements it.
type KafkaSource interface {
	Stats() kafka.Stats
}

// Topic is what the Observer reads of a topic: every *topic.Handle
// implements it.
type Topic interface {
	Stats() topic.Stats
}

// Options configures an Observer. The zero value is ready to use.
type Options struct {
	// Logger receives the handler's logs (a failed metrics write). Nil
	// means slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns o with a nil Logger replaced by slog.Default().
func (o Options) WithDefaults() Options {
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

// Validate returns nil: every value of every field is valid.
func (o Options) Validate() error { return nil }

// Observer collects the stats of the pipelines, Kafka sources and topics
// added to it. It is a prometheus.Collector, and serves the HTTP endpoints
// (Handler). Its methods are safe for concurrent use.
type Observer struct {
	log *slog.Logger

	mu        sync.Mutex
	pipelines []Pipeline
	kafka     []KafkaSource
	topics    []namedTopic
	pulsar    []namedPulsar
	links     map[string]TopicLinks
}

type namedTopic struct {
	name string
	t    Topic
	// published is the highest Published exported for the topic: the
	// counter never goes below it (see collectTopic).
	published *atomic.Uint64
}

// TopicLinks are the pipelines a topic connects: those that publish into
// it and those that subscribe to it.
type TopicLinks struct {
	Publishers  []string `json:"publishers"`
	Subscribers []string `json:"subscribers"`
}

// LinkTopic records which pipelines (by name) publish into the topic
// name and which subscribe to it, so that the dashboard draws the topic
// between them. A later call for the same topic replaces the links. The
// topic need not be added with AddTopic; its counters are shown only if
// it is.
func (o *Observer) LinkTopic(name string, links TopicLinks) {
	links.Publishers = append([]string(nil), links.Publishers...)
	links.Subscribers = append([]string(nil), links.Subscribers...)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.links == nil {
		o.links = map[string]TopicLinks{}
	}
	o.links[name] = links
}

// topicLinks returns a copy of the links LinkTopic recorded.
func (o *Observer) topicLinks() map[string]TopicLinks {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.links)
}

// New returns an Observer with nothing added yet.
func New(opts Options) *Observer {
	return &Observer{log: opts.WithDefaults().Logger}
}

// Add adds pipelines: their stats become metrics, and their state decides
// /healthz and /readyz. Adding the same pipeline twice reports it twice;
// pipeline names must be unique among those added (Prometheus refuses
// two series with the same labels).
func (o *Observer) Add(pipelines ...Pipeline) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pipelines = append(o.pipelines, pipelines...)
}

// AddKafka adds Kafka sources: their consumer groups' lag, offsets,
// assignments, rebalances and commits become metrics (labelled by group,
// topic and partition). The source's pipeline must be added with Add for
// its health to count.
func (o *Observer) AddKafka(sources ...KafkaSource) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.kafka = append(o.kafka, sources...)
}

// AddTopic adds a topic under name (its topic.Name): its publish counters
// and subscribers become metrics labelled topic=name.
func (o *Observer) AddTopic(name string, t Topic) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.topics = append(o.topics, namedTopic{name: name, t: t, published: new(atomic.Uint64)})
}

// snapshot copies the lists, so that reading stats holds no lock.
func (o *Observer) snapshot() ([]Pipeline, []KafkaSource, []namedTopic) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Pipeline(nil), o.pipelines...), append([]KafkaSource(nil), o.kafka...), append([]namedTopic(nil), o.topics...)
}
