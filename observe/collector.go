package observe

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/internal/stats"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
)

// Label names. Every label has a bounded set of values: the names of the
// pipelines, stages, batchers and topics the program declares, the fixed
// sets of states, dispositions and triggers, and the partitions of the
// consumed Kafka topics.
const (
	lPipeline    = "pipeline"
	lStage       = "stage"
	lBatcher     = "batcher"
	lState       = "state"
	lDisposition = "disposition"
	lTrigger     = "trigger"
	lGroup       = "group"
	lTopic       = "topic"
	lPartition   = "partition"
	lFeed        = "feed"
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("boulevard_"+name, help, labels, nil)
}

var (
	pipelineUp        = desc("pipeline_up", "1 while the pipeline runs, 0 before it has started and once it has stopped.", lPipeline)
	pipelineRateLimit = desc("pipeline_rate_limit_messages_per_second", "The rate limit in force, in messages per second; absent when there is none.", lPipeline)

	producerState     = desc("producer_state", "1 for the state the producer stage is in (starting, connecting, running, degraded, restarting, stopped, failed), 0 for the others.", lPipeline, lStage, lState)
	producerRestarts  = desc("producer_restarts_total", "Restarts of the stage's source after a failure.", lPipeline, lStage)
	producerFailures  = desc("producer_consecutive_failures", "Runs of the source in a row that failed without delivering a message.", lPipeline, lStage)
	producerBuffered  = desc("producer_buffered_messages", "Delivered messages waiting in the stage buffer for room in the processors' queues.", lPipeline, lStage)
	producerUnhandled = desc("producer_messages_unhandled_total", "Messages the source delivered that the stage left unacknowledged, never handed to the processors, because the drain was cut short.", lPipeline, lStage)
	producerStateTime = desc("producer_state_since_seconds", "Unix time at which the stage entered its current state.", lPipeline, lStage)
	producerHandOff   = desc("producer_longest_handoff_seconds", "How long the stage's hand-over of delivered messages to the processors has been running their PartitionBy (0 when none runs, always 0 without PartitionBy); while it blocks, the source is stopped and the processors are idle.", lPipeline, lStage)

	feedGranted     = desc("producer_feed_permits_granted_total", "Permits granted to the feed since the source registered it.", lPipeline, lStage, lFeed)
	feedOutstanding = desc("producer_feed_permits_outstanding", "Permits granted to the feed and not yet charged: how many more messages its consumer may have fetched or may fetch.", lPipeline, lStage, lFeed)
	feedDelivered   = desc("producer_feed_messages_delivered_total", "Messages the feed delivered into the stage buffer since the source registered it.", lPipeline, lStage, lFeed)
	feedDispatched  = desc("producer_feed_messages_dispatched_total", "Messages of the feed that left the stage buffer for the processors.", lPipeline, lStage, lFeed)

	procReceived  = desc("processor_messages_received_total", "Messages the processors took from their queues.", lPipeline)
	procSucceeded = desc("processor_messages_succeeded_total", "Messages the processor handler returned without error.", lPipeline)
	procFailed    = desc("processor_messages_failed_total", "Messages that failed in the processors, by the disposition they were acknowledged with.", lPipeline, lDisposition)
	procUnhandled = desc("processor_messages_unhandled_total", "Messages left unacknowledged by the processors because the drain was cut short: still queued, not yet handled, or not taken by their batcher.", lPipeline)
	procInFlight  = desc("processor_messages_in_flight", "Messages in the chunks the processors hold.", lPipeline)
	procQueued    = desc("processor_queue_messages", "Messages waiting in the processors' queues.", lPipeline)
	procQueueCap  = desc("processor_queue_capacity_messages", "Capacity of the processors' queues together.", lPipeline)
	procBusy      = desc("processor_busy_seconds_total", "Time the processors spent handling chunks, all processors together.", lPipeline)
	procWorkers   = desc("processor_concurrency", "Number of processors.", lPipeline)
	procDuration  = desc("processor_handler_duration_seconds", "Duration of the processor handler, sampled on the first message of one chunk in 64.", lPipeline)
	procLongest   = desc("processor_longest_call_seconds", "How long the longest-running chunk (up to MaxDemand messages, handled one after the other, then acknowledged) a processor holds has been running (0 when none holds one), to within the pipeline's StallCheckInterval.", lPipeline)

	batReceived  = desc("batcher_messages_received_total", "Messages the batcher took from its queues.", lPipeline, lBatcher)
	batBatches   = desc("batcher_batches_total", "Batches emitted, by trigger.", lPipeline, lBatcher, lTrigger)
	batSize      = desc("batcher_batch_size_messages", "Sizes of the emitted batches.", lPipeline, lBatcher)
	batSucceeded = desc("batcher_messages_succeeded_total", "Messages of handled batches that succeeded.", lPipeline, lBatcher)
	batFailed    = desc("batcher_messages_failed_total", "Messages of handled batches that failed, by the disposition they were acknowledged with.", lPipeline, lBatcher, lDisposition)
	batUnhandled = desc("batcher_messages_unhandled_total", "Messages left unacknowledged in the batcher because the drain was cut short before their batch was handled.", lPipeline, lBatcher)
	batDropped   = desc("batcher_messages_dropped_total", "Messages acknowledged by their processor already, or deferred, that the drain cut short left in the batcher before their batch was handled.", lPipeline, lBatcher)
	batInFlight  = desc("batcher_messages_in_flight", "Messages taken in and not yet acknowledged: in open batches, waiting for a batch processor, or being handled.", lPipeline, lBatcher)
	batQueued    = desc("batcher_queue_messages", "Messages waiting in the batcher's input queues.", lPipeline, lBatcher)
	batQueueCap  = desc("batcher_queue_capacity_messages", "Capacity of the batcher's input queues together.", lPipeline, lBatcher)
	batBatchesQ  = desc("batcher_queued_batches", "Batches waiting for a batch processor.", lPipeline, lBatcher)
	batBatchCap  = desc("batcher_batch_queue_capacity_batches", "Capacity of the batcher's queues of batches waiting for a batch processor, together.", lPipeline, lBatcher)
	batBusy      = desc("batcher_busy_seconds_total", "Time the batch processors spent in the batch handler, all together.", lPipeline, lBatcher)
	batWorkers   = desc("batcher_concurrency", "Number of batch processors.", lPipeline, lBatcher)
	batDuration  = desc("batcher_handler_duration_seconds", "Duration of the batch handler, timed on one batch in ceil(64/BatchSize) of each batch processor (every batch from BatchSize 64 up).", lPipeline, lBatcher)
	batLongest   = desc("batcher_longest_call_seconds", "How long the longest-running batch (its handler, then acknowledging) a batch processor holds has been running (0 when none holds one), to within the pipeline's StallCheckInterval.", lPipeline, lBatcher)
)

var states = []producer.State{producer.StateStarting, producer.StateConnecting, producer.StateRunning,
	producer.StateDegraded, producer.StateRestarting, producer.StateStopped, producer.StateFailed}

var allDescs = []*prometheus.Desc{
	pipelineUp, pipelineRateLimit,
	producerState, producerRestarts, producerFailures, producerBuffered, producerUnhandled, producerStateTime, producerHandOff,
	feedGranted, feedOutstanding, feedDelivered, feedDispatched,
	procReceived, procSucceeded, procFailed, procUnhandled, procInFlight, procQueued, procQueueCap, procBusy, procWorkers, procDuration, procLongest,
	batReceived, batBatches, batSize, batSucceeded, batFailed, batUnhandled, batDropped, batInFlight, batQueued, batQueueCap, batBatchesQ, batBatchCap, batBusy, batWorkers, batDuration, batLongest,
}

// Describe sends the descriptions of every metric the Observer may
// collect (prometheus.Collector).
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
	for _, d := range kafkaDescs {
		ch <- d
	}
	for _, d := range topicDescs {
		ch <- d
	}
	for _, d := range pulsarDescs {
		ch <- d
	}
	for _, d := range topologyDescs {
		ch <- d
	}
}

// Collect reads a snapshot of everything added (pipelines, sources,
// topics, topology sources and Kafka topology backends) and sends them as
// metrics (prometheus.Collector).
//
// A Stats that panics, or that has not returned within
// Options.StatsTimeout, does not stop the others: Collect sends the
// metrics of everything else, and, for each one that failed, an invalid
// metric whose error wraps ErrStats and names it, so that the registry's
// Gather returns the others' metrics with that error (see Handler).
//
// Each series is sent once, so that a scrape never fails. Add refuses a
// second pipeline of a name, but two pipelines can still report the same
// name at a scrape (a Pipeline implementation whose Stats changes its
// name): the name's series then come from the running one, or, when
// several or none run, from the one added last. Two Kafka members can
// report the same series too (sources of one consumer group run in stages
// of the same name, or a partition two members claim at once while a
// rebalance moves it): each comes from the member, or the claim, of the
// newest group generation (the one added first among equals). Each such
// duplicate is logged once, when a scrape first sees it, not at every
// scrape: once it is gone, it is logged again if it comes back. The
// partitions of a group a scrape first sees claimed twice are one line,
// naming the first 32 and counting them all.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	r := o.read(context.Background())
	var dups []duplicate
	seen := map[feedKey]struct{}{}
	dups = collectPipelines(ch, r.pipes, dups, &o.feeds, seen)
	o.feeds.forget(seen)
	dups = collectKafka(ch, r.kafka, dups)
	for _, t := range r.topics {
		collectTopic(ch, t.e, t.st)
	}
	for _, p := range r.pulsar {
		collectPulsar(ch, p.e.subscription, p.st)
	}
	for _, t := range r.topologies {
		collectTopology(ch, t.e.name, t.st)
	}
	now := time.Now()
	for _, b := range r.kafkaTopologies {
		collectKafkaTopology(ch, b.e.name, b.st, now)
	}
	for _, err := range r.errs {
		ch <- prometheus.NewInvalidMetric(prometheus.NewInvalidDesc(err), err)
	}
	o.logDuplicates(dups)
}

// labelValue returns s with the bytes that are not valid UTF-8 replaced
// with U+FFFD, as it is exported: Prometheus refuses such a value, and
// one name added to the Observer must not fail the whole scrape.
func labelValue(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// validLabels replaces, in place, each label value by its labelValue.
func validLabels(labels []string) []string {
	for i, l := range labels {
		labels[i] = labelValue(l)
	}
	return labels
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, validLabels(labels)...)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, validLabels(labels)...)
}

func histogram(ch chan<- prometheus.Metric, d *prometheus.Desc, h stats.Histogram, labels ...string) {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		buckets[b] = cum
	}
	ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets, validLabels(labels)...)
}

func failures(ch chan<- prometheus.Metric, d *prometheus.Desc, f stats.Failures, labels ...string) {
	for _, x := range []struct {
		name string
		v    uint64
	}{{"default", f.Default}, {"retry", f.Retry}, {"discard", f.Discard}} {
		counter(ch, d, float64(x.v), append(labels, x.name)...)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectPipelines sends the metrics of pipes, one pipeline per name (see
// Collect), and an invalid metric for each pipeline that could not be
// read, and returns dups with the names reported twice.
func collectPipelines(ch chan<- prometheus.Metric, pipes []pipeRead, dups []duplicate, marks *feedMarks, seen map[feedKey]struct{}) []duplicate {
	sel, dups := selectPipelines(pipes, dups)
	for i := range sel {
		if err := sel[i].err; err != nil {
			ch <- prometheus.NewInvalidMetric(prometheus.NewInvalidDesc(err), err)
			continue
		}
		collectPipeline(ch, sel[i].st, marks, seen)
	}
	return dups
}

// selectPipelines returns, in the order added, the pipelines of pipes
// that are reported: those that could not be read (with their error),
// and of those that could, one per name (as exported, which the returned
// stats carry), the running one, or, when several or none run, the one
// added last (see Collect). It returns dups with the names reported
// twice. /metrics, /healthz, /readyz and /stats all report this choice.
// pipes is reused.
func selectPipelines(pipes []pipeRead, dups []duplicate) ([]pipeRead, []duplicate) {
	for i := range pipes {
		pipes[i].st.Name = labelValue(pipes[i].st.Name)
	}
	if len(pipes) < 2 {
		return pipes, dups
	}
	// kept[i] is false for a pipeline whose name another one's series
	// carry. Names are few: comparing each with those before it costs
	// less than a map.
	kept := make([]bool, len(pipes))
	for i := range pipes {
		kept[i] = true
		if pipes[i].err != nil {
			continue
		}
		for j := range i {
			if !kept[j] || pipes[j].err != nil || pipes[j].st.Name != pipes[i].st.Name {
				continue
			}
			dups = addDuplicate(dups, duplicate{kind: dupPipeline, labels: [3]string{pipes[i].st.Name}})
			if running(pipes[j].st) && !running(pipes[i].st) {
				kept[i] = false
			} else {
				kept[j] = false
			}
			break
		}
	}
	out := pipes[:0] // in place: an element moves only to a lower index
	for i := range pipes {
		if kept[i] {
			out = append(out, pipes[i])
		}
	}
	return out, dups
}

// running reports whether the pipeline of st runs: started and not
// stopped, as boulevard_pipeline_up says.
func running(st pipeline.Stats) bool { return !st.Started.IsZero() && !st.Stopped }

func collectPipeline(ch chan<- prometheus.Metric, st pipeline.Stats, marks *feedMarks, seen map[feedKey]struct{}) {
	name := st.Name
	gauge(ch, pipelineUp, boolValue(running(st)), name)
	if rl := st.RateLimit; rl != nil {
		gauge(ch, pipelineRateLimit, float64(rl.Allowed)/rl.Interval.Seconds(), name)
	}
	for _, ps := range st.Producers {
		for _, s := range states {
			gauge(ch, producerState, boolValue(ps.State == s), name, ps.Stage, string(s))
		}
		counter(ch, producerRestarts, float64(ps.Restarts), name, ps.Stage)
		gauge(ch, producerFailures, float64(ps.ConsecutiveFailures), name, ps.Stage)
		gauge(ch, producerBuffered, float64(ps.Buffered), name, ps.Stage)
		counter(ch, producerUnhandled, float64(ps.Unhandled), name, ps.Stage)
		if !ps.Since.IsZero() {
			gauge(ch, producerStateTime, float64(ps.Since.UnixNano())/1e9, name, ps.Stage)
		}
		gauge(ch, producerHandOff, ps.LongestHandOff.Seconds(), name, ps.Stage)
		collectFeeds(ch, name, ps.Stage, ps.Feeds, marks, seen)
	}
	pr := st.Processors
	counter(ch, procReceived, float64(pr.In), name)
	counter(ch, procSucceeded, float64(pr.Succeeded), name)
	failures(ch, procFailed, pr.Failed, name)
	counter(ch, procUnhandled, float64(pr.Unhandled), name)
	gauge(ch, procInFlight, float64(pr.InFlight), name)
	gauge(ch, procQueued, float64(pr.Queued), name)
	gauge(ch, procQueueCap, float64(pr.QueueCapacity), name)
	counter(ch, procBusy, pr.Busy.Seconds(), name)
	gauge(ch, procWorkers, float64(pr.Concurrency), name)
	histogram(ch, procDuration, pr.Latency, name)
	gauge(ch, procLongest, pr.LongestCall.Seconds(), name)
	for _, b := range st.Batchers {
		counter(ch, batReceived, float64(b.In), name, b.Name)
		for trigger, n := range b.Batches {
			counter(ch, batBatches, float64(n), name, b.Name, trigger)
		}
		histogram(ch, batSize, b.Sizes, name, b.Name)
		counter(ch, batSucceeded, float64(b.Succeeded), name, b.Name)
		failures(ch, batFailed, b.Failed, name, b.Name)
		counter(ch, batUnhandled, float64(b.Unhandled), name, b.Name)
		counter(ch, batDropped, float64(b.Dropped), name, b.Name)
		gauge(ch, batInFlight, float64(b.InFlight), name, b.Name)
		gauge(ch, batQueued, float64(b.Queued), name, b.Name)
		gauge(ch, batQueueCap, float64(b.QueueCapacity), name, b.Name)
		gauge(ch, batBatchesQ, float64(b.QueuedBatches), name, b.Name)
		gauge(ch, batBatchCap, float64(b.BatchQueueCapacity), name, b.Name)
		counter(ch, batBusy, b.Busy.Seconds(), name, b.Name)
		gauge(ch, batWorkers, float64(b.Concurrency), name, b.Name)
		histogram(ch, batDuration, b.Latency, name, b.Name)
		gauge(ch, batLongest, b.LongestCall.Seconds(), name, b.Name)
	}
}

// collectFeeds sends the permit counters of a stage's open feeds. Two open
// feeds of a stage with the same name (a source that registers the same
// consumer twice) are sent as one, their counters added, so that the
// label set stays unique; when one of them closes while the other stays
// open, the counts it had reached are carried into the series (marks), so
// that its counters do not go down. The series sent are added to seen.
func collectFeeds(ch chan<- prometheus.Metric, pipe, stage string, feeds []producer.NamedFeedStats, marks *feedMarks, seen map[feedKey]struct{}) {
	if len(feeds) == 0 {
		return
	}
	sum := make(map[string]*producer.FeedStats, len(feeds))
	count := make(map[string]int, len(feeds))
	order := make([]string, 0, len(feeds))
	for _, f := range feeds {
		t, ok := sum[f.Name]
		if !ok {
			t = &producer.FeedStats{}
			sum[f.Name] = t
			order = append(order, f.Name)
		}
		count[f.Name]++
		t.Granted += f.Granted
		t.Remaining += f.Remaining
		t.Delivered += f.Delivered
		t.Dispatched += f.Dispatched
	}
	for _, n := range order {
		t := sum[n]
		k := feedKey{labelValue(pipe), labelValue(stage), labelValue(n)}
		seen[k] = struct{}{}
		marks.carry(k, count[n], t)
		counter(ch, feedGranted, float64(t.Granted), pipe, stage, n)
		gauge(ch, feedOutstanding, float64(t.Remaining), pipe, stage, n)
		counter(ch, feedDelivered, float64(t.Delivered), pipe, stage, n)
		counter(ch, feedDispatched, float64(t.Dispatched), pipe, stage, n)
	}
}

func partitionLabel(p int32) string { return strconv.FormatInt(int64(p), 10) }

// feedKey identifies the series of a feed (label values as exported).
type feedKey struct {
	pipeline, stage, feed string
}

// feedMarks keeps, for each feed series a scrape carried, what the
// latest scrape sent, so that a later one can tell a twin closing (fewer
// feeds of the name, their sum lower) from a feed counting again from
// zero (see collectFeeds). A series no scrape carries is forgotten.
type feedMarks struct {
	mu sync.Mutex
	m  map[feedKey]feedMark
}

// feedMark is what a scrape sent for a feed series: how many open feeds
// it added, the counters sent, and the counts of closed twins carried
// into them.
type feedMark struct {
	feeds      int
	sent, kept producer.FeedStats
}

// carry adds to t (the counters of the n open feeds of series k) the
// counts of their twins that closed while a feed of the name stayed open,
// so that the series does not go down when one of two feeds of a name
// closes. A series whose feeds did not get fewer is sent as counted: a
// lone feed registered again since the latest scrape counts from zero,
// and its series reads as a reset, as the feed's own counters do.
func (f *feedMarks) carry(k feedKey, n int, t *producer.FeedStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[feedKey]feedMark{}
	}
	prev, ok := f.m[k]
	kept := prev.kept
	if ok && n < prev.feeds {
		kept.Granted += prev.sent.Granted - min(prev.sent.Granted, t.Granted+kept.Granted)
		kept.Delivered += prev.sent.Delivered - min(prev.sent.Delivered, t.Delivered+kept.Delivered)
		kept.Dispatched += prev.sent.Dispatched - min(prev.sent.Dispatched, t.Dispatched+kept.Dispatched)
	}
	t.Granted += kept.Granted
	t.Delivered += kept.Delivered
	t.Dispatched += kept.Dispatched
	f.m[k] = feedMark{feeds: n, sent: *t, kept: kept}
}

// forget drops the marks of the series not in seen, those of feeds gone
// by this scrape.
func (f *feedMarks) forget(seen map[feedKey]struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	maps.DeleteFunc(f.m, func(k feedKey, _ feedMark) bool {
		_, ok := seen[k]
		return !ok
	})
}
