// Package observe exposes running pipelines to operators: a Prometheus
// collector built from Pipeline.Stats snapshots (and from the stats of the
// Kafka sources, Pulsar sources, topics, topology sources and Kafka
// topology backends registered with it), and one
// http.Handler serving /metrics, /healthz, /readyz, /stats and the live
// /dashboard.
//
// Nothing is registered globally: the caller registers the Observer on the
// prometheus.Registerer of its choice, and mounts the Handler on its own
// server, or lets Observer.Serve serve it on an address of its own, with
// bounds on what a client can hold and a bounded Server.Close. Collecting reads the snapshots only when Prometheus scrapes, so
// the message path pays nothing for it beyond the counters the stages keep
// anyway.
//
//	obs := observe.New(observe.Options{})
//	defer obs.Close(ctx) // waits for the Stats calls the Observer started
//	if err := obs.Add(ctx, p); err != nil { // any *pipeline.Pipeline, one per name
//		return err
//	}
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(obs)
//	http.Handle("/", obs.Handler(reg))
//
// or, without a server of the program's own:
//
//	srv, err := obs.Serve(ctx, observe.ServerOptions{Addr: ":9090", Gatherer: reg}) // 127.0.0.1:9090
//	if err != nil {
//		return err
//	}
//	defer srv.Close(ctx)
package observe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/validate"
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

// ErrDuplicate is wrapped by the error of Add, AddTopic, AddPulsar,
// AddTopology and AddKafkaTopology when the name given is already added,
// and of AddKafka when the source is:
// Prometheus refuses two series with the same name and labels. Names are
// compared as they are exported, that is with the bytes that are not
// valid UTF-8 replaced by U+FFFD.
var ErrDuplicate = errors.New("observe: already added")

// ErrInvalid is wrapped by the error of Add, Replace, AddKafka, AddTopic,
// AddPulsar, AddTopology and AddKafkaTopology when an argument cannot be
// added: a nil value (a nil interface or a nil pointer, whose Stats would
// panic), or an empty name (Prometheus drops a label whose value is
// empty, so its series would carry no name). The error names the
// argument.
var ErrInvalid = errors.New("observe: invalid argument")

// Options configures an Observer. The zero value is ready to use.
type Options struct {
	// Logger receives the Observer's logs: a failed metrics write, a
	// collector that failed at a scrape (one line per scrape, see
	// Observer.Handler), and series that two of the things added report
	// at once (one line when that starts, see Observer.Collect). Nil
	// means slog.Default().
	Logger *slog.Logger `name:"-"`
	// StatsTimeout bounds how long a scrape, a check or /stats waits for
	// the Stats of what was added (all read at once, each on a goroutine
	// of its own). A Stats that has not returned by then, or that
	// panics, is reported as failed (an error wrapping ErrStats) and the
	// rest is served; a Stats still running after StatsTimeout is not
	// called again until it returns (see ErrStatsPending). Add, Replace,
	// AddKafka, Health, Readiness and Snapshot wait for the Stats they
	// read as long at most, and less when their context ends first. 0 means
	// DefaultStatsTimeout (5s); at most MaxStatsTimeout (1m; New uses
	// DefaultStatsTimeout in place of a negative value and
	// MaxStatsTimeout in place of a longer one).
	StatsTimeout time.Duration `validate:"gte=0,lte=1m"`
}

// WithDefaults returns o with a nil Logger replaced by slog.Default()
// and a zero StatsTimeout by DefaultStatsTimeout.
func (o Options) WithDefaults() Options {
	o.Logger = cmp.Or(o.Logger, slog.Default())
	o.StatsTimeout = cmp.Or(o.StatsTimeout, DefaultStatsTimeout)
	return o
}

// Validate returns nil or a validate.Errors naming every broken rule
// ("observe.statsTimeout must be ≤ 1m").
func (o Options) Validate() error { return validate.Struct("observe", &o) }

// Observer collects the stats of the pipelines, sources, topics and
// topology backends added to it. It is a prometheus.Collector, and serves
// the HTTP endpoints (Handler). Its methods are safe for concurrent use.
type Observer struct {
	log     *slog.Logger
	timeout time.Duration

	mu        sync.Mutex
	pipelines []namedPipeline
	kafka     []namedKafka
	topics    []namedTopic
	pulsar    []namedPulsar
	links     map[string]TopicLinks
	// topologies are the topology sources, kafkaTopologies the Kafka
	// topology backends (AddTopology, AddKafkaTopology).
	topologies      []namedTopology
	kafkaTopologies []namedKafkaTopology

	// pendingPipes and pendingKafka are the guards of the values that
	// Add, Replace and AddKafka read that are not added (o.mu).
	pendingPipes pending[pipeline.Stats]
	pendingKafka pending[kafka.Stats]
	// calls keeps the Stats calls running, for Close.
	calls calls

	// feeds are the highest feed counters scrapes sent (see collectFeeds).
	feeds feedMarks

	// dupMu guards dups, the series reported twice at the latest scrape
	// (see logDuplicates).
	dupMu sync.Mutex
	dups  map[duplicate]struct{}
}

type namedPipeline struct {
	// name is the pipeline's name as exported (labelValue).
	name string
	p    Pipeline
	g    *guard[pipeline.Stats]
}

type namedKafka struct {
	s KafkaSource
	g *guard[kafka.Stats]
}

type namedTopic struct {
	name string
	t    Topic
	// published is the highest Published exported for the topic: the
	// counter never goes below it (see collectTopic).
	published *atomic.Uint64
	g         *guard[topic.Stats]
}

// TopicLinks are the pipelines a topic connects: those that publish into
// it and those that subscribe to it.
type TopicLinks struct {
	// Publishers are the pipelines that publish into the topic.
	Publishers []string `json:"publishers"`
	// Subscribers are the pipelines that subscribe to it.
	Subscribers []string `json:"subscribers"`
}

// LinkTopic records which pipelines (by name) publish into the topic
// name and which subscribe to it, so that the dashboard draws the topic
// between them. A later call for the same topic replaces the links. The
// topic need not be added with AddTopic; its counters are shown only if
// it is. A call with no publishers and no subscribers forgets the topic's
// links: call it so for a topic that is gone (RemoveTopic keeps them), or
// the links of every topic ever linked are kept.
func (o *Observer) LinkTopic(name string, links TopicLinks) {
	links.Publishers = append([]string(nil), links.Publishers...)
	links.Subscribers = append([]string(nil), links.Subscribers...)
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(links.Publishers) == 0 && len(links.Subscribers) == 0 {
		delete(o.links, name)
		return
	}
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
	opts = opts.WithDefaults()
	timeout := opts.StatsTimeout
	if timeout < 0 {
		timeout = DefaultStatsTimeout
	}
	return &Observer{log: opts.Logger, timeout: min(timeout, MaxStatsTimeout)}
}

// Add adds pipelines: their stats become metrics, and their state decides
// /healthz and /readyz. Each pipeline is known by its name (Stats().Name),
// which must not be one already added: Prometheus refuses two series of
// the same name and labels. When one of pipelines has a name already
// added, or that another of them has, Add adds none of them and returns
// an error wrapping ErrDuplicate that names each such pipeline. A nil
// pipeline (or nil pointer) is refused the same way, with an error
// wrapping ErrInvalid that names its place in pipelines. To swap a
// rebuilt pipeline in under its name, use Replace. Once Close is called,
// Add returns ErrClosed.
//
// Add reads each pipeline's name from its Stats as a scrape does: all at
// once, each on a goroutine of its own, waiting until ctx ends or
// Options.StatsTimeout has passed, whichever comes first. When one
// panics or has not returned by then, Add adds none of them and returns
// an error wrapping ErrStats (and ctx.Err() when ctx ended first) that
// names its place in pipelines; nothing
// can be added without its name, which the duplicates, Remove and
// Replace go by. A ctx that has already ended fails Add unless the
// Stats have returned by the time Add looks, which a goroutine just
// started rarely has: a program that adds while it shuts down (its
// context cancelled) passes one the shutdown does not end, such as
// context.WithoutCancel(ctx), StatsTimeout still bounding the wait. A
// Stats that blocks keeps its goroutine until it returns (Close waits
// for it), and is not called again meanwhile: a
// later Add or Replace of the same pipeline (the same value) returns at
// once an error wrapping ErrStats and ErrStatsPending, whatever its ctx.
// A pipeline whose type cannot be compared (== panics on it) has no
// identity to go by: while the Stats of one such pipeline that an
// earlier call gave up on has not returned, every such pipeline is
// refused that way. A nil ctx returns ErrNilContext, nothing read or
// added.
func (o *Observer) Add(ctx context.Context, pipelines ...Pipeline) error {
	if ctx == nil {
		return ErrNilContext
	}
	if o.calls.isClosed() {
		return ErrClosed
	}
	if err := nilElements("pipelines", pipelines); err != nil {
		return err
	}
	named, err := o.namePipelines(ctx, pipelines, func(i int) string { return fmt.Sprintf("pipelines[%d]", i) })
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var errs []error
	for i, n := range named {
		if o.pipelineIndex(n.name) >= 0 || slices.ContainsFunc(named[:i], func(m namedPipeline) bool { return m.name == n.name }) {
			errs = append(errs, fmt.Errorf("%w: pipeline %q", ErrDuplicate, n.name))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	o.pipelines = append(o.pipelines, named...)
	return nil
}

// Replace adds p in place of the pipeline added under the same name, at
// its place in the reports, or after the others when there is none, and
// reports whether there was one. Every later scrape and check reads p: a
// service that rebuilds a pipeline (after a fatal error, say) swaps the
// new one in with Replace, and the name's series go on without a gap,
// following the new pipeline. A nil p (or nil pointer) is refused, with
// an error wrapping ErrInvalid, and nothing is replaced; once Close is
// called, Replace returns ErrClosed. Replace reads p's name as Add does,
// waiting until ctx ends or Options.StatsTimeout has passed at most:
// when its Stats panics or has not returned by then, or an earlier call
// of it has not returned (see Add), nothing is replaced and the error
// wraps ErrStats. A nil ctx returns ErrNilContext, nothing read or
// replaced.
func (o *Observer) Replace(ctx context.Context, p Pipeline) (replaced bool, err error) {
	if ctx == nil {
		return false, ErrNilContext
	}
	if o.calls.isClosed() {
		return false, ErrClosed
	}
	if isNil(p) {
		return false, nilError("the pipeline", p)
	}
	named, err := o.namePipelines(ctx, []Pipeline{p}, func(int) string { return "the pipeline" })
	if err != nil {
		return false, err
	}
	n := named[0]
	o.mu.Lock()
	defer o.mu.Unlock()
	if i := o.pipelineIndex(n.name); i >= 0 {
		o.pipelines[i] = n
		return true, nil
	}
	o.pipelines = append(o.pipelines, n)
	return false, nil
}

// Remove removes the pipeline added under name, and reports whether there
// was one: its series are no longer exported, /healthz and /readyz no
// longer report it, and the name may be added again.
func (o *Observer) Remove(name string) bool {
	name = labelValue(name)
	return removeFrom(&o.mu, &o.pipelines, func() int { return o.pipelineIndex(name) })
}

// checkNamed returns the error refusing what is added under name (a topic
// or a Pulsar subscription, what) when name is empty or v is nil or a nil
// pointer, and nil otherwise.
func checkNamed(what, name string, v any) error {
	var errs []error
	if name == "" {
		errs = append(errs, fmt.Errorf("%w: the %s name is empty", ErrInvalid, what))
	}
	if isNil(v) {
		errs = append(errs, nilError(fmt.Sprintf("%s %q", what, labelValue(name)), v))
	}
	return errors.Join(errs...)
}

// removeFrom deletes from *s, under mu, the element at the index index
// returns (called under mu), and reports whether there was one (an index
// of -1 is none).
func removeFrom[E any](mu *sync.Mutex, s *[]E, index func() int) bool {
	mu.Lock()
	defer mu.Unlock()
	i := index()
	if i < 0 {
		return false
	}
	*s = slices.Delete(*s, i, i+1)
	return true
}

// isNil reports whether v is nil or a nil pointer: a value whose Stats
// would panic.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// nilError returns the error, wrapping ErrInvalid, refusing the argument
// what, whose value v is nil or a nil pointer.
func nilError(what string, v any) error {
	if v == nil {
		return fmt.Errorf("%w: %s is nil", ErrInvalid, what)
	}
	return fmt.Errorf("%w: %s is a nil %T", ErrInvalid, what, v)
}

// nilElements returns the errors refusing each element of vs that is nil
// or a nil pointer, named name[i], joined; nil when there is none.
func nilElements[E any](name string, vs []E) error {
	var errs []error
	for i, v := range vs {
		if isNil(v) {
			errs = append(errs, nilError(fmt.Sprintf("%s[%d]", name, i), v))
		}
	}
	return errors.Join(errs...)
}

// namePipelines reads the name of each of ps from its Stats, as read
// does (readNow), the pipeline ps[i] named what(i) in its error. The
// error joins those of the pipelines whose Stats could not be read. A
// pipeline already added (the same value) is read through its guard,
// any other through the guard pending keeps of it, so that a Stats that
// has not returned is not called again.
func (o *Observer) namePipelines(ctx context.Context, ps []Pipeline, what func(i int) string) ([]namedPipeline, error) {
	named := make([]namedPipeline, len(ps))
	cs := make([]statsCall[pipeline.Stats], len(ps))
	o.mu.Lock()
	for i, p := range ps {
		var g *guard[pipeline.Stats]
		if j := slices.IndexFunc(o.pipelines, func(n namedPipeline) bool { return same(n.p, p) }); j >= 0 {
			g = o.pipelines[j].g
		} else {
			g = o.pendingPipes.guard(p)
		}
		named[i] = namedPipeline{p: p, g: cmp.Or(g, new(guard[pipeline.Stats]))}
		cs[i] = statsCall[pipeline.Stats]{g: g, what: what(i), f: p.Stats}
	}
	o.mu.Unlock()
	sts, errs := readNow(ctx, o.timeout, &o.calls, cs)
	for i := range named {
		named[i].name = labelValue(sts[i].Name)
	}
	return named, errors.Join(errs...)
}

// same reports whether a and b are the same value. Values of a type
// that cannot be compared are never the same.
func same(a, b any) bool {
	return hasIdentity(a) && reflect.TypeOf(a) == reflect.TypeOf(b) && a == b
}

// pipelineIndex returns the index of the pipeline added under name (as
// exported), or -1. o.mu is held.
func (o *Observer) pipelineIndex(name string) int {
	return slices.IndexFunc(o.pipelines, func(n namedPipeline) bool { return n.name == name })
}

// AddKafka adds Kafka sources: their consumer groups' lag, offsets,
// assignments, rebalances and commits become metrics (labelled by group,
// topic and partition). The source's pipeline must be added with Add for
// its health to count. When one of sources is already added (or given
// twice), AddKafka adds none of them and returns an error wrapping
// ErrDuplicate; when one is nil (or a nil pointer), it adds none of them
// and returns an error wrapping ErrInvalid that names its place in
// sources. Sources of the same consumer group may be added: what their
// members report twice is exported once (see Collect).
//
// AddKafka reads no Stats of a source it adds. It reads those of the
// sources it refuses as duplicates, to name their groups in the error,
// as a scrape does (each on a goroutine of its own), waiting until ctx
// ends or Options.StatsTimeout has passed at most: a source whose Stats
// panics or has not returned by then, or whose earlier call has not
// returned (see Add), is named by its place in sources, and its error
// wraps ErrStats as well. Once Close is called, AddKafka returns
// ErrClosed. A nil ctx returns ErrNilContext, nothing read or added.
func (o *Observer) AddKafka(ctx context.Context, sources ...KafkaSource) error {
	if ctx == nil {
		return ErrNilContext
	}
	if o.calls.isClosed() {
		return ErrClosed
	}
	if err := nilElements("sources", sources); err != nil {
		return err
	}
	// dups are the Stats to read of the duplicates (dups[i] that of the
	// source at places[i]), one of a source added through its guard, as
	// a scrape reads it, so that a Stats that blocks is not called again
	// meanwhile.
	var dups []statsCall[kafka.Stats]
	var places []int
	o.mu.Lock()
	for i, s := range sources {
		if j := slices.IndexFunc(o.kafka, sameKafka(s)); j >= 0 {
			dups = append(dups, statsCall[kafka.Stats]{g: o.kafka[j].g, what: fmt.Sprintf("Kafka source %d", j), f: s.Stats})
		} else if slices.ContainsFunc(sources[:i], sameSource(s)) {
			dups = append(dups, statsCall[kafka.Stats]{g: o.pendingKafka.guard(s), what: fmt.Sprintf("sources[%d]", i), f: s.Stats})
		} else {
			continue
		}
		places = append(places, i)
	}
	if len(dups) == 0 {
		for _, s := range sources {
			o.kafka = append(o.kafka, namedKafka{s: s, g: new(guard[kafka.Stats])})
		}
	}
	o.mu.Unlock()
	sts, readErrs := readNow(ctx, o.timeout, &o.calls, dups) // to name them, without the lock
	errs := make([]error, len(dups))
	for i := range dups {
		if readErrs[i] != nil {
			errs[i] = fmt.Errorf("%w: the Kafka source sources[%d], whose group is unknown: %w", ErrDuplicate, places[i], readErrs[i])
			continue
		}
		errs[i] = fmt.Errorf("%w: the Kafka source of group %q", ErrDuplicate, labelValue(sts[i].GroupID))
	}
	return errors.Join(errs...)
}

// RemoveKafka removes the Kafka source s, and reports whether it was
// added. A service that rebuilds a pipeline with a new source removes the
// old source and adds the new one.
func (o *Observer) RemoveKafka(s KafkaSource) bool {
	return removeFrom(&o.mu, &o.kafka, func() int { return slices.IndexFunc(o.kafka, sameKafka(s)) })
}

// sameKafka returns a function reporting whether its argument holds s.
func sameKafka(s KafkaSource) func(namedKafka) bool {
	same := sameSource(s)
	return func(k namedKafka) bool { return same(k.s) }
}

// sameSource returns a function reporting whether its argument is s.
// Values of a type that cannot be compared are never the same.
func sameSource(s KafkaSource) func(KafkaSource) bool {
	t := reflect.TypeOf(s)
	return func(k KafkaSource) bool {
		return t != nil && t.Comparable() && reflect.TypeOf(k) == t && k == s
	}
}

// AddTopic adds a topic under name (its topic.Name): its publish counters
// and subscribers become metrics labelled topic=name, and so, labelled by
// group and partition too, does the lag of the partitions its subscribers
// read (topic.Stats.Partitions: a Kafka topic's). A name already
// added is refused with an error wrapping ErrDuplicate; an empty name, or
// a nil t (or nil pointer), with an error wrapping ErrInvalid. AddTopic
// reads no Stats, and does not block; once Close is called, it returns
// ErrClosed.
func (o *Observer) AddTopic(name string, t Topic) error {
	return addNamed(o, &o.topics, "topic", name, t, topicName,
		namedTopic{name: name, t: t, published: new(atomic.Uint64), g: new(guard[topic.Stats])})
}

// RemoveTopic removes the topic added under name, and reports whether
// there was one. Its links are kept: LinkTopic with no pipelines forgets
// them.
func (o *Observer) RemoveTopic(name string) bool {
	return removeNamed(o, &o.topics, name, topicName)
}

func topicName(t namedTopic) string { return t.name }

// addNamed appends e, the value v added under name, to *list, one of the
// lists o.mu guards, and returns nil. It refuses it, returning the error,
// once Close is called (ErrClosed), when name is empty or v is nil or a
// nil pointer (see checkNamed, what naming the kind), and when an element
// of *list has the name name (nameOf), compared as exported
// (ErrDuplicate).
func addNamed[E any](o *Observer, list *[]E, what, name string, v any, nameOf func(E) string, e E) error {
	if o.calls.isClosed() {
		return ErrClosed
	}
	if err := checkNamed(what, name, v); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if namedIndex(*list, name, nameOf) >= 0 {
		return fmt.Errorf("%w: %s %q", ErrDuplicate, what, labelValue(name))
	}
	*list = append(*list, e)
	return nil
}

// removeNamed removes the element of *list added under name (see
// addNamed), and reports whether there was one.
func removeNamed[E any](o *Observer, list *[]E, name string, nameOf func(E) string) bool {
	return removeFrom(&o.mu, list, func() int { return namedIndex(*list, name, nameOf) })
}

// namedIndex returns the index of the element of list whose name (nameOf)
// is name, compared as exported, or -1.
func namedIndex[E any](list []E, name string, nameOf func(E) string) int {
	name = labelValue(name)
	return slices.IndexFunc(list, func(e E) bool { return labelValue(nameOf(e)) == name })
}

// named copies the lists of the things added under a name, so that
// reading stats holds no lock.
func (o *Observer) named() ([]namedTopic, []namedPulsar, []namedTopology, []namedKafkaTopology) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.topics), slices.Clone(o.pulsar), slices.Clone(o.topologies), slices.Clone(o.kafkaTopologies)
}

// snapshot copies the lists of pipelines and Kafka sources, so that
// reading stats holds no lock.
func (o *Observer) snapshot() ([]namedPipeline, []namedKafka) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.pipelines), slices.Clone(o.kafka)
}
