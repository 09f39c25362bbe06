package pulsar_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
)

// Stats count what reached the stage, what came back, what was nacked and
// what the client moved to the dead-letter topic: a message that always
// fails, with MaxDeliveries 3, is received three times (twice as a
// redelivery), nacked three times and dead-lettered once; the others are
// received once.
func TestStatsCountRedeliveriesNacksAndDeadLetters(t *testing.T) {
	e := newEnv(t)
	e.publish("stats-dlq", "m", 5)
	co := earliest()
	co.NackRedeliveryDelay = 20 * time.Millisecond
	co.DLQ = &pulsar.DLQPolicy{MaxDeliveries: 3, DeadLetterTopic: "stats-dlq-dead", InitialSubscriptionName: "dead",
		ProducerOptions: pulsar.ProducerOptions{SendTimeout: -1}}
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"stats-dlq"}, Subscription: "sub", Consumer: co})
	_, stop := start(t, pipeline.Options[[]byte, []byte]{
		Name:     "stats",
		Logger:   testLogger(),
		Producer: producer.Options[[]byte]{Source: src},
		Processors: processor.Options[[]byte, []byte]{Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
			if string(m.Data) == "m-1" {
				return nil, errors.New("always fails")
			}
			return m.Data, nil
		}},
	})
	waitFor(t, "the poison message in the dead letter topic", func() bool { return len(e.broker.Messages("stats-dlq-dead")) == 1 })
	waitFor(t, "the backlog to empty", func() bool { return e.broker.Backlog("stats-dlq", "sub") == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st := src.Stats()
	if st.Received != 7 || st.Redelivered != 2 || st.Nacked != 3 || st.DeadLettered != 1 {
		t.Fatalf("stats %+v: want 7 received, 2 redelivered, 3 nacked, 1 dead-lettered", st)
	}
}

// Stats show the permits: with nothing leaving the stage, the default
// window's 100 permits are granted, 88 used for the messages the stage
// holds, and the client's queue of 12 counted; once every message has left
// the stage, each used one permit, and the grants stayed within a window of
// what left.
func TestStatsShowPermitsAndClientQueue(t *testing.T) {
	e := newEnv(t)
	e.publish("stats-permits", "m", 500)
	out := newGatedOutput()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"stats-permits"}, Subscription: "sub", Consumer: earliest()})
	startProducer(t, src, 1, producer.Flow{}, out)
	want := bpulsar.Stats{Consumers: 1, Received: 88, PermitsGranted: 100, PermitsAvailable: 12, ClientQueue: 12}
	waitFor(t, "the stage to hold its share of the window", func() bool { return src.Stats() == want })
	out.allow(500)
	waitFor(t, "every message to leave the stage", func() bool {
		st := src.Stats()
		return st.Received == 500 && st.PermitsGranted-st.PermitsAvailable == 500
	})
	if st := src.Stats(); st.PermitsGranted > 600 || st.ClientQueue != 12 {
		t.Fatalf("stats %+v: want at most 600 permits granted for 500 messages, and the client queue of 12", st)
	}
}

// The source's collector exports its Stats as Prometheus metrics labelled
// by pipeline and subscription, with names and help that pass the linter,
// read when scraped.
func TestCollectorExportsStats(t *testing.T) {
	e := newEnv(t)
	e.publish("stats-metrics", "m", 200)
	out := newGatedOutput()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"stats-metrics"}, Subscription: "billing", Consumer: earliest()})
	startProducer(t, src, 1, producer.Flow{}, out)
	waitFor(t, "the stage to hold its share of the window", func() bool { return src.Stats().Received == 88 })
	c := src.Collector("orders")
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %+v", err, problems)
	}
	want := `
# HELP boulevard_pulsar_client_queue_messages Messages the clients of the open consumers may hold or be owed by the broker beyond what the source took.
# TYPE boulevard_pulsar_client_queue_messages gauge
boulevard_pulsar_client_queue_messages{pipeline="orders",subscription="billing"} 12
# HELP boulevard_pulsar_consumers Consumers the source has open.
# TYPE boulevard_pulsar_consumers gauge
boulevard_pulsar_consumers{pipeline="orders",subscription="billing"} 1
# HELP boulevard_pulsar_permits_available Permits the open consumers have not used yet.
# TYPE boulevard_pulsar_permits_available gauge
boulevard_pulsar_permits_available{pipeline="orders",subscription="billing"} 12
# HELP boulevard_pulsar_permits_granted_total Permits the producer stages' feeds granted the consumers.
# TYPE boulevard_pulsar_permits_granted_total counter
boulevard_pulsar_permits_granted_total{pipeline="orders",subscription="billing"} 100
# HELP boulevard_pulsar_received_total Messages taken from the client and delivered to the producer stages.
# TYPE boulevard_pulsar_received_total counter
boulevard_pulsar_received_total{pipeline="orders",subscription="billing"} 88
`
	names := []string{"boulevard_pulsar_client_queue_messages", "boulevard_pulsar_consumers", "boulevard_pulsar_permits_available",
		"boulevard_pulsar_permits_granted_total", "boulevard_pulsar_received_total"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c); n != 11 {
		t.Fatalf("%d series, want 11", n)
	}
	out.allow(200)
	waitFor(t, "every message received", func() bool { return src.Stats().Received == 200 })
	if v := testutil.ToFloat64(onlyMetric(c, "boulevard_pulsar_received_total")); v != 200 {
		t.Fatalf("received_total %v after every message, want 200", v)
	}
}

// onlyMetric is c restricted to the metric called name.
func onlyMetric(c prometheus.Collector, name string) prometheus.Collector {
	return filtered{c, name}
}

type filtered struct {
	prometheus.Collector
	name string
}

func (f filtered) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() { f.Collector.Collect(all); close(all) }()
	for m := range all {
		if strings.Contains(m.Desc().String(), `"`+f.name+`"`) {
			ch <- m
		}
	}
}
