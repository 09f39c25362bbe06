package observe_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.yaml.in/yaml/v3"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/kafkatopology"
)

const examplesDir = "../examples"

// dashboard is the part of a Grafana dashboard JSON the checks read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr       string `json:"expr"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
}

// liveFamilies starts a pipeline with every kind of stage (a producer
// stage with a feed and a rate limit, processors, a batcher), a Kafka
// source with claimed partitions on an in-process cluster, a Pulsar
// source's stats, a topic, a topology source's stats and a Kafka topology
// backend's stall, and returns the metric families an Observer
// of them exports, by name.
func liveFamilies(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cfg.Consumer.Group.Session.Timeout = 2 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	src, err := kafka.New(kafka.Options{Brokers: cluster.ListenAddrs(), GroupID: "dash", Topics: []string{"events"},
		InitialOffset: kafka.OffsetEarliest, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:       "from-kafka",
		Producer:   producer.Options[[]byte]{Source: src, Concurrency: 1},
		Processors: processor.Options[[]byte, []byte]{Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) { return m.Data, nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name: "numbers",
		Producer: producer.Options[int]{Source: endless(), Concurrency: 1,
			RateLimit: &producer.RateLimit{Allowed: 100, Interval: 100 * time.Millisecond}},
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }},
		Batchers: []batcher.Options[int]{{Name: "default", BatchSize: 10, BatchTimeout: 10 * time.Millisecond,
			Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil }}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := memTopic(t, "orders", topic.Options{})
	obs := observe.New(observe.Options{})
	add(t, obs, p, kp)
	if err := obs.AddKafka(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	if err := obs.AddTopic("orders", h); err != nil {
		t.Fatal(err)
	}
	// The Pulsar, topology and topic partition metrics' names and labels,
	// from stats given here: a topology source, a Kafka topology backend
	// with a stall and a claimed partition, and a topic with a claimed
	// partition.
	stall := kafkatopology.Stall{Topic: "settlement-hold-5s", Partition: 0, Since: time.Now(), Failures: 1}
	backend := newFixedKafkaTopology()
	backend.st.Store(&kafkatopology.Stats{Stalled: []kafkatopology.Stall{stall},
		Partitions: []kafkatopology.PartitionStats{{Topic: "settlement", Group: "settlement:billing", HighWater: 1, Lag: 1}},
		Holds:      []kafkatopology.HoldStats{{Topic: "settlement-hold-5s", HighWater: 1, Waiting: 1}}})
	if err := errors.Join(obs.AddPulsar("billing", fixedPulsar(pulsar.Stats{Consumers: 1})),
		obs.AddTopology("settlement", fixedTopology(topology.Stats{Received: 1})),
		obs.AddKafkaTopology("settlement-kafka", backend),
		// A Kafka topic's partitions, read by a group of this process.
		obs.AddTopic("payments", fixedTopic(topic.Stats{BalancedGroups: 1,
			Partitions: []topic.PartitionStats{{Group: "payments:ledger", HighWater: 1, Lag: 1}}}))); err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, obs)
	for _, pp := range []interface{ Start(context.Context) error }{p, kp} {
		if err := pp.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = p.Stop(ctx)
		_ = kp.Stop(ctx)
	})
	var fams map[string]*dto.MetricFamily
	wait.For(t, "batches, feeds and Kafka partitions in the metrics", func() bool {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		fams = map[string]*dto.MetricFamily{}
		for _, mf := range mfs {
			fams[mf.GetName()] = mf
		}
		return fams["boulevard_batcher_batches_total"] != nil && fams["boulevard_producer_feed_permits_outstanding"] != nil &&
			fams["boulevard_kafka_consumer_lag_messages"] != nil
	})
	return fams
}

var (
	metricRe  = regexp.MustCompile(`\bboulevard_[a-zA-Z0-9_:]+`)
	byRe      = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	matcherRe = regexp.MustCompile(`\{([^}]*)\}`)
	labelRe   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
)

// family resolves a series name of a PromQL expression (a histogram's
// _bucket, _sum or _count included) to its exported family.
func family(fams map[string]*dto.MetricFamily, name string) *dto.MetricFamily {
	if mf := fams[name]; mf != nil {
		return mf
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok {
			if mf := fams[base]; mf != nil && mf.GetType() == dto.MetricType_HISTOGRAM {
				return mf
			}
		}
	}
	return nil
}

// checkExpr reports the metrics expr names that the collector does not
// export, and the labels it groups or filters by that none of them has.
func checkExpr(t *testing.T, where, expr string, fams map[string]*dto.MetricFamily) {
	t.Helper()
	names := metricRe.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: %q names no boulevard metric", where, expr)
		return
	}
	// Besides the metrics' own labels: le, the name, and the labels
	// Prometheus gives every series it scrapes (its target's job and
	// instance).
	labels := map[string]bool{"le": true, "__name__": true, "job": true, "instance": true}
	for _, n := range names {
		mf := family(fams, n)
		if mf == nil {
			t.Errorf("%s: %q names %s, which the collector does not export", where, expr, n)
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = true
			}
		}
	}
	var used []string
	for _, m := range byRe.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			used = append(used, strings.TrimSpace(l))
		}
	}
	for _, m := range matcherRe.FindAllStringSubmatch(expr, -1) {
		for _, l := range labelRe.FindAllStringSubmatch(m[1], -1) {
			used = append(used, l[1])
		}
	}
	for _, l := range used {
		if l != "" && !labels[l] {
			t.Errorf("%s: %q uses label %q, which none of %v has", where, expr, l, names)
		}
	}
}

// Guarantee: the Grafana dashboard in examples/grafana parses as a
// dashboard, every panel queries the provisioned Prometheus data source,
// and every PromQL expression in it names only metrics (and labels) that
// a live Observer exports.
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(examplesDir, "grafana/dashboards/boulevard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Fatalf("dashboard has no uid or title: %q %q", d.UID, d.Title)
	}
	prov, err := os.ReadFile(filepath.Join(examplesDir, "grafana/provisioning/datasources/prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var dsProv struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
		} `yaml:"datasources"`
	}
	if err := yaml.Unmarshal(prov, &dsProv); err != nil || len(dsProv.Datasources) != 1 || dsProv.Datasources[0].Type != "prometheus" {
		t.Fatalf("datasource provisioning: %v %+v", err, dsProv)
	}
	uid := dsProv.Datasources[0].UID

	fams := liveFamilies(t)
	queries := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		where := "panel " + p.Title
		if p.Datasource.UID != uid {
			t.Errorf("%s: data source %q, want the provisioned %q", where, p.Datasource.UID, uid)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", where)
		}
		for _, tg := range p.Targets {
			if tg.Datasource.UID != uid {
				t.Errorf("%s: query data source %q, want %q", where, tg.Datasource.UID, uid)
			}
			checkExpr(t, where, tg.Expr, fams)
			queries++
		}
	}
	for _, v := range d.Templating.List {
		checkExpr(t, "variable "+v.Name, v.Definition, fams)
	}
	if queries < 10 {
		t.Errorf("only %d queries in the dashboard", queries)
	}
}

// Guarantee: promtool accepts the Prometheus configuration the compose
// file mounts, and the rules files it loads (skipped when promtool is not
// installed).
func TestPrometheusConfigPassesPromtool(t *testing.T) {
	runPromtool(t, "check", "config", prometheusFile)
}
