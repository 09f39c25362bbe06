package observe_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/kafkatopology"
)

// expectInvalid fails the test unless call returns, without panicking, an
// error wrapping ErrInvalid whose message contains each of names.
func expectInvalid(t *testing.T, what string, call func() error, names ...string) {
	t.Helper()
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panicked: %v", r)
			}
		}()
		err = call()
	}()
	if !errors.Is(err, observe.ErrInvalid) {
		t.Errorf("%s: error %v, want one wrapping ErrInvalid", what, err)
		return
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("%s: error %q does not name %s", what, err, n)
		}
	}
}

// Guarantee: Add, Replace, AddKafka, AddTopic, AddPulsar, AddTopology and
// AddKafkaTopology refuse a nil value (a nil interface or a nil pointer) with an error wrapping ErrInvalid that
// names the argument, instead of panicking then or at a later scrape; a
// variadic call with one nil argument adds none of its arguments, and
// /metrics, /readyz and /stats then answer as if none had been given.
func TestAddRefusesNilWithAnErrorNamingTheArgument(t *testing.T) {
	obs := observe.New(observe.Options{})
	good := pushPipeline(t, "orders")
	expectInvalid(t, "Add(nil)", func() error { return obs.Add(t.Context(), nil) }, "pipelines[0]", "nil")
	expectInvalid(t, "Add of a nil *pipeline.Pipeline", func() error { return obs.Add(t.Context(), (*pipeline.Pipeline[int, int])(nil)) },
		"pipelines[0]", "*pipeline.Pipeline[int,int]")
	expectInvalid(t, "Add(good, nil)", func() error { return obs.Add(t.Context(), good, nil) }, "pipelines[1]")
	expectInvalid(t, "Replace(nil)", func() error { _, err := obs.Replace(t.Context(), nil); return err }, "the pipeline", "nil")
	expectInvalid(t, "Replace of a nil *pipeline.Pipeline", func() error {
		_, err := obs.Replace(t.Context(), (*pipeline.Pipeline[int, int])(nil))
		return err
	}, "*pipeline.Pipeline[int,int]")

	src := newFixedKafka(kafka.Stats{GroupID: "readers", Members: []kafka.MemberStats{{Stage: "events.producer.0"}}})
	expectInvalid(t, "AddKafka(nil)", func() error { return obs.AddKafka(t.Context(), nil) }, "sources[0]", "nil")
	expectInvalid(t, "AddKafka of a nil *kafka.Source", func() error { return obs.AddKafka(t.Context(), (*kafka.Source)(nil)) },
		"sources[0]", "*kafka.Source")
	expectInvalid(t, "AddKafka(src, nil)", func() error { return obs.AddKafka(t.Context(), src, nil) }, "sources[1]")

	expectInvalid(t, "AddTopic(orders, nil)", func() error { return obs.AddTopic("orders", nil) }, `"orders"`, "nil")
	expectInvalid(t, "AddTopic of a nil *topic.Handle", func() error { return obs.AddTopic("orders", (*topic.Handle[int])(nil)) },
		`"orders"`, "*topic.Handle[int]")
	expectInvalid(t, "AddPulsar(billing, nil)", func() error { return obs.AddPulsar("billing", nil) }, `"billing"`, "nil")
	expectInvalid(t, "AddPulsar of a nil *pulsar.Source", func() error { return obs.AddPulsar("billing", (*pulsar.Source)(nil)) },
		`"billing"`, "*pulsar.Source")
	expectInvalid(t, "AddTopology(orders, nil)", func() error { return obs.AddTopology("orders", nil) }, `"orders"`, "nil")
	expectInvalid(t, "AddTopology of a nil *topology.Source", func() error { return obs.AddTopology("orders", (*topology.Source[int])(nil)) },
		`"orders"`, "*topology.Source[int]")
	expectInvalid(t, "AddKafkaTopology(orders-kafka, nil)", func() error { return obs.AddKafkaTopology("orders-kafka", nil) }, `"orders-kafka"`, "nil")
	expectInvalid(t, "AddKafkaTopology of a nil *kafkatopology.Backend", func() error {
		return obs.AddKafkaTopology("orders-kafka", (*kafkatopology.Backend[int])(nil))
	}, `"orders-kafka"`, "*kafkatopology.Backend[int]")

	if t.Failed() {
		t.Fatal("a nil value was accepted: a scrape would panic on it")
	}
	h := obs.Handler(nil)
	if code, body := serveMetrics(t, h); code != http.StatusOK || strings.Contains(body, "boulevard_") {
		t.Errorf("/metrics after the refused calls: %d, want 200 without a series:\n%s", code, body)
	}
	if rep := expect(t, h, "/readyz", http.StatusOK, ""); len(rep.Pipelines) != 0 {
		t.Errorf("/readyz after the refused calls: %+v, want no pipeline", rep)
	}
	if snap := obs.Snapshot(t.Context()); len(snap.Pipelines)+len(snap.Kafka)+len(snap.Topics)+len(snap.Pulsar)+len(snap.Topologies)+len(snap.KafkaTopologies) != 0 {
		t.Errorf("/stats after the refused calls: %+v, want nothing", snap)
	}
	add(t, obs, good) // the refused calls left the name free
	if err := obs.AddKafka(t.Context(), src); err != nil {
		t.Errorf("AddKafka(src) after the refused AddKafka(src, nil): %v, want nil", err)
	}
}

// Guarantee: AddTopic refuses an empty topic name, AddPulsar an empty
// subscription, AddTopology and AddKafkaTopology an empty name, with an
// error wrapping ErrInvalid, adding nothing: Prometheus drops a label
// whose value is empty, so the series would carry no name at all.
func TestAddRefusesAnEmptyTopicOrSubscriptionName(t *testing.T) {
	obs := observe.New(observe.Options{})
	expectInvalid(t, `AddTopic("")`, func() error { return obs.AddTopic("", memTopic(t, "orders", topic.Options{})) }, "topic name", "empty")
	expectInvalid(t, `AddPulsar("")`, func() error { return obs.AddPulsar("", fixedPulsar(pulsar.Stats{Consumers: 1})) }, "subscription", "empty")
	expectInvalid(t, `AddTopology("")`, func() error { return obs.AddTopology("", fixedTopology(topology.Stats{Received: 1})) }, "topology name", "empty")
	expectInvalid(t, `AddKafkaTopology("")`, func() error { return obs.AddKafkaTopology("", newFixedKafkaTopology()) }, "backend name", "empty")
	if code, body := serveMetrics(t, obs.Handler(nil)); code != http.StatusOK || strings.Contains(body, "boulevard_") {
		t.Errorf("/metrics after the refused calls: %d, want 200 without a series:\n%s", code, body)
	}
	if snap := obs.Snapshot(t.Context()); len(snap.Topics)+len(snap.Pulsar)+len(snap.Topologies)+len(snap.KafkaTopologies) != 0 {
		t.Errorf("/stats after the refused calls: %+v, want nothing", snap)
	}
}
