package observe

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/boulevard-go/boulevard/internal/stats"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/topic"
)

// Snapshot is the JSON body of /stats: one snapshot of everything added to
// the Observer. Errors are given as their messages.
type Snapshot struct {
	// Time is when the snapshot was taken.
	Time time.Time `json:"time"`
	// Pipelines are the pipelines (Add), Kafka the Kafka sources
	// (AddKafka), Topics the topics (AddTopic) and Pulsar the Pulsar
	// sources (AddPulsar).
	Pipelines []PipelineSnapshot `json:"pipelines"`
	Kafka     []kafka.Stats      `json:"kafka"`
	Topics    []TopicSnapshot    `json:"topics"`
	Pulsar    []PulsarSnapshot   `json:"pulsar"`
	// Topologies are the topology sources (AddTopology), KafkaTopologies
	// the Kafka topology backends' stalls (AddKafkaTopology).
	Topologies      []TopologySnapshot      `json:"topologies"`
	KafkaTopologies []KafkaTopologySnapshot `json:"kafkaTopologies"`
	// Links are the topics' publishing and subscribing pipelines, by topic
	// name (Observer.LinkTopic).
	Links map[string]TopicLinks `json:"links"`
	// Failed are the errors, wrapping ErrStats, of the things added whose
	// Stats panicked or did not return within Options.StatsTimeout: they
	// are left out of the lists above.
	Failed []string `json:"failed,omitempty"`
}

// PipelineSnapshot is one pipeline's pipeline.Stats, as JSON.
type PipelineSnapshot struct {
	// Name, Started and Stopped are pipeline.Stats' fields of those names;
	// Err is its Err's message, "" when nil.
	Name    string    `json:"name"`
	Started time.Time `json:"started"`
	Stopped bool      `json:"stopped"`
	Err     string    `json:"err,omitempty"`
	// Producers, Processors and Batchers are the stages' counters, as
	// pipeline.Stats reports them.
	Producers  []ProducerSnapshot `json:"producers"`
	Processors stats.Processors   `json:"processors"`
	Batchers   []stats.Batcher    `json:"batchers"`
	// RateLimit is the rate limit in force in messages per second, 0 when
	// there is none.
	RateLimit float64 `json:"rateLimit"`
}

// ProducerSnapshot is one producer stage, as JSON.
type ProducerSnapshot struct {
	// Stage, State, Since, Restarts and ConsecutiveFailures are the
	// stage's producer.StageStatus; LastError is its LastError's message,
	// "" when nil.
	Stage               string    `json:"stage"`
	State               string    `json:"state"`
	Since               time.Time `json:"since"`
	Restarts            int       `json:"restarts"`
	ConsecutiveFailures int       `json:"consecutiveFailures"`
	LastError           string    `json:"lastError,omitempty"`
	// Buffered is the messages waiting in the stage buffer.
	Buffered int `json:"buffered"`
	// Unhandled is the messages a drain cut short left in the stage,
	// never handed to the processors (pipeline.ProducerStats.Unhandled).
	Unhandled uint64 `json:"unhandled"`
	// Feeds are the stage's open feeds.
	Feeds []FeedSnapshot `json:"feeds"`
	// LongestHandOff is how long the stage's hand-over of delivered
	// messages to the processors has been running their PartitionBy, 0
	// when none runs (pipeline.ProducerStats.LongestHandOff).
	LongestHandOff time.Duration `json:"longestHandOff"`
}

// FeedSnapshot is one open feed's permit counters, as JSON
// (producer.NamedFeedStats).
type FeedSnapshot struct {
	// Name is the name the source registered the feed with.
	Name string `json:"name"`
	// Granted is the permits granted; Outstanding those not yet charged.
	Granted     int `json:"granted"`
	Outstanding int `json:"outstanding"`
	// Delivered and Dispatched are the messages delivered into the stage
	// buffer and those that left it.
	Delivered  int `json:"delivered"`
	Dispatched int `json:"dispatched"`
	// Withdrawn is the messages the source took back out of the stage
	// buffer; Overdelivered the most the source was ever ahead of its
	// grants, 0 for a source that honours its window
	// (producer.FeedStats).
	Withdrawn     int `json:"withdrawn"`
	Overdelivered int `json:"overdelivered"`
}

// TopicSnapshot is one topic's topic.Stats, with its name.
type TopicSnapshot struct {
	// Name is the name the topic was added under.
	Name string `json:"name"`
	topic.Stats
	// Partitions are the Stats' Partitions, each with its FetchErr as
	// its message.
	Partitions []TopicPartitionSnapshot `json:"Partitions"`
}

// TopicPartitionSnapshot is one topic.PartitionStats, as JSON: its fields
// under their Go names, FetchErr given as its message.
type TopicPartitionSnapshot struct {
	topic.PartitionStats
	// FetchErr is the PartitionStats' FetchErr, as its message: the
	// error of the partition's last failed fetch while its fetches fail,
	// "" otherwise. The backend takes its credentials out of it.
	FetchErr string `json:"FetchErr,omitempty"`
}

func topicSnapshot(name string, st topic.Stats) TopicSnapshot {
	snap := TopicSnapshot{Name: name, Stats: st, Partitions: make([]TopicPartitionSnapshot, len(st.Partitions))}
	for i, p := range st.Partitions {
		snap.Partitions[i] = TopicPartitionSnapshot{PartitionStats: p, FetchErr: errString(p.FetchErr)}
	}
	return snap
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Snapshot reads the stats of everything added to the Observer once. Of
// the pipelines, and Kafka members and claims, that report the same
// series at once, it holds those whose series /metrics reports (see
// Collect). It waits for the stats until ctx ends or
// Options.StatsTimeout has passed, whichever comes first: what could not
// be read by then is in Failed. Snapshot panics on a nil ctx.
func (o *Observer) Snapshot(ctx context.Context) Snapshot {
	r := o.read(ctx)
	snap := Snapshot{Time: time.Now(), Pipelines: []PipelineSnapshot{}, Topics: []TopicSnapshot{}, Links: o.topicLinks()}
	if snap.Links == nil {
		snap.Links = map[string]TopicLinks{}
	}
	sel, _ := selectPipelines(r.pipes, nil)
	for _, p := range sel {
		if p.err != nil {
			snap.Failed = append(snap.Failed, p.err.Error())
			continue
		}
		snap.Pipelines = append(snap.Pipelines, pipelineSnapshot(p.st))
	}
	snap.Kafka = kafkaStats(r.kafka)
	for _, t := range r.topics {
		snap.Topics = append(snap.Topics, topicSnapshot(t.e.name, t.st))
	}
	snap.Pulsar = []PulsarSnapshot{}
	for _, p := range r.pulsar {
		snap.Pulsar = append(snap.Pulsar, PulsarSnapshot{Subscription: p.e.subscription, Stats: p.st})
	}
	snap.Topologies = []TopologySnapshot{}
	for _, t := range r.topologies {
		snap.Topologies = append(snap.Topologies, TopologySnapshot{Name: t.e.name, Stats: t.st})
	}
	snap.KafkaTopologies = []KafkaTopologySnapshot{}
	for _, b := range r.kafkaTopologies {
		snap.KafkaTopologies = append(snap.KafkaTopologies, kafkaTopologySnapshot(b.e.name, b.st))
	}
	for _, err := range r.errs {
		snap.Failed = append(snap.Failed, err.Error())
	}
	return snap
}

func pipelineSnapshot(st pipeline.Stats) PipelineSnapshot {
	ps := PipelineSnapshot{Name: st.Name, Started: st.Started, Stopped: st.Stopped, Err: errString(st.Err),
		Producers: []ProducerSnapshot{}, Processors: st.Processors, Batchers: st.Batchers}
	if ps.Batchers == nil {
		ps.Batchers = []stats.Batcher{}
	}
	if rl := st.RateLimit; rl != nil {
		ps.RateLimit = float64(rl.Allowed) / rl.Interval.Seconds()
	}
	for _, p := range st.Producers {
		feeds := make([]FeedSnapshot, len(p.Feeds))
		for i, f := range p.Feeds {
			feeds[i] = FeedSnapshot{Name: f.Name, Granted: f.Granted, Outstanding: f.Remaining, Delivered: f.Delivered, Dispatched: f.Dispatched,
				Withdrawn: f.Withdrawn, Overdelivered: f.Overdelivered}
		}
		ps.Producers = append(ps.Producers, ProducerSnapshot{Stage: p.Stage, State: string(p.State), Since: p.Since,
			Restarts: p.Restarts, ConsecutiveFailures: p.ConsecutiveFailures, LastError: errString(p.LastError), Buffered: p.Buffered,
			Unhandled: p.Unhandled, Feeds: feeds, LongestHandOff: p.LongestHandOff})
	}
	return ps
}

// serveStats answers the JSON Snapshot, or, when it cannot be encoded
// (a value JSON has no form for, such as an infinite rate a Pipeline of
// the caller's reports), 500 with the encoding error, logged as a
// warning. A body of gzipFrom bytes or more goes out gzip-compressed to
// a client whose Accept-Encoding accepts it (browsers, and Go's
// http.Client, which decompresses it unseen).
func (o *Observer) serveStats(w http.ResponseWriter, r *http.Request) {
	body, err := json.Marshal(o.Snapshot(r.Context()))
	if err != nil {
		o.log.Warn("encoding the stats as JSON failed", "error", err)
		http.Error(w, fmt.Sprintf("observe: encoding the stats as JSON failed: %v", err), http.StatusInternalServerError)
		return
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Add("Vary", "Accept-Encoding")
	if len(body) >= gzipFrom && acceptsGzip(r.Header.Values("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		zw := gzipWriters.Get().(*gzip.Writer)
		zw.Reset(w)
		_, err = zw.Write(body)
		if cerr := zw.Close(); err == nil {
			err = cerr
		}
		zw.Reset(io.Discard) // let go of w
		gzipWriters.Put(zw)
	} else {
		_, err = w.Write(body)
	}
	if err != nil {
		o.log.Debug("writing stats failed", "error", err)
	}
}

// gzipFrom is the size from which a /stats body goes out compressed to a
// client that accepts gzip. A deployment of thousands of partitions
// answers megabytes a poll (the dashboard polls each second), which
// compress about tenfold; a small body is not worth the work.
const gzipFrom = 32 << 10

// gzipWriters are the gzip writers of /stats answers, kept between polls
// (a writer holds about a megabyte of compression state).
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed) // a valid level: no error
	return zw
}}

// acceptsGzip reports whether Accept-Encoding values accept gzip: a
// "gzip" (or "x-gzip") coding, or "*", without q=0.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(c, ";")
			name = strings.ToLower(strings.TrimSpace(name))
			if name != "gzip" && name != "x-gzip" && name != "*" {
				continue
			}
			if q, ok := strings.CutPrefix(strings.ReplaceAll(strings.TrimSpace(params), " ", ""), "q="); ok {
				if f, err := strconv.ParseFloat(q, 64); err != nil || f == 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}
