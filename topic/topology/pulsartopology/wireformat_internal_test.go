package pulsartopology

import (
	"maps"
	"slices"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// The wire format of a letter's message is what a later version reads from
// hold topics and DLQs written by this one: property names, their values'
// formats, key and payload bytes. The tests below write the names and
// values as literals, so that a change to any of them fails here; such a
// change needs a release that reads both formats first (docs/topology.md).

// wireProperties are the properties of topologytest.WireLetter's message for group
// billing (a hold's or a requeue's) as this version writes them.
var wireProperties = map[string]string{
	"topology-shard":               "3",
	"topology-retries":             "2",
	"topology-first-failure":       "2026-03-01T12:04:05.123456789Z",
	"topology-last-failure":        "2026-03-01T12:06:00.5Z",
	"topology-resume":              "true",
	"topology-group":               "billing",
	"topology-death-reason":        "max_retries",
	"topology-death-error":         "boom",
	"topology-death-topic":         "orders",
	"topology-death-group":         "billing",
	"topology-death-retries":       "2",
	"topology-death-first-failure": "2026-03-01T12:04:05.123456789Z",
	"topology-death-last-failure":  "2026-03-01T12:06:00Z",
}

const (
	wireKey     = "customer-42"
	wirePayload = `{"key":"A","n":7}`
)

func wireQueues(t *testing.T) *queues[topologytest.Msg] {
	t.Helper()
	top, err := topology.New("orders").ForConsumerGroup("billing").Build()
	if err != nil {
		t.Fatal(err)
	}
	b := &Backend[topologytest.Msg]{opts: Options[topologytest.Msg]{Codec: topic.JSONCodec[topologytest.Msg]{}}}
	return &queues[topologytest.Msg]{b: b, t: top, group: "billing"}
}

// Guarantee: a letter's message for one group carries its key and JSON
// payload as they are, and its history and group in properties of fixed
// names, times in UTC RFC 3339 with nanoseconds (trailing zeros cut),
// whatever zone the letter's times are in, counts in decimal, Resume as
// "true".
func TestALettersMessageKeepsItsWireFormat(t *testing.T) {
	l := topologytest.WireLetter()
	m, err := wireQueues(t).message(&l, "billing")
	if err != nil {
		t.Fatal(err)
	}
	keys := append(slices.Collect(maps.Keys(m.Properties)), slices.Collect(maps.Keys(wireProperties))...)
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		got, inGot := m.Properties[k]
		want, inWant := wireProperties[k]
		if got != want || inGot != inWant {
			t.Errorf("property %q = %q (set: %t), want %q (set: %t)", k, got, inGot, want, inWant)
		}
	}
	if m.Key != wireKey || string(m.Payload) != wirePayload {
		t.Errorf("key %q, payload %q; want %q and %q", m.Key, m.Payload, wireKey, wirePayload)
	}
}

// Guarantee: a fresh letter published for every group carries no
// properties at all.
func TestAFreshLettersMessageCarriesNoProperties(t *testing.T) {
	m, err := wireQueues(t).message(&topology.Letter[topologytest.Msg]{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Properties != nil || m.Key != "" {
		t.Errorf("properties %v, key %q; want none", m.Properties, m.Key)
	}
}

// Guarantee: a message as this version writes it to a hold topic or DLQ
// decodes into the letter it was written from (its key, the message's,
// left to the reader), for its group.
func TestAMessageWrittenByThisVersionDecodesIntoItsLetter(t *testing.T) {
	l, group, err := decodeLetter[topologytest.Msg](topic.JSONCodec[topologytest.Msg]{}, maps.Clone(wireProperties), []byte(wirePayload))
	if err != nil {
		t.Fatal(err)
	}
	topologytest.CheckWireLetter(t, l, false)
	if group != "billing" {
		t.Errorf("group = %q, want billing", group)
	}
}
