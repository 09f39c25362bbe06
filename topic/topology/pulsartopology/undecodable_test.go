package pulsartopology_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a burst of messages that do not decode (a payload the codec
// refuses, a history property that breaks the rules) is logged in a few
// lines: the first in full, the rest counted (held_back, with the ids of
// the first and the last held back) and said when the reader closes; the
// reader counts every one (Undecodable).
func TestABurstOfUndecodableMessagesIsLoggedInAFewLines(t *testing.T) {
	br := testbroker.Pulsar(t)
	var lines logtest.Lines
	o := options(br, topic.Codec[string](topic.JSONCodec[string]{}))
	o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
	be := newBackend(t, o)
	q, r := declared(t, be, build(t, topology.New("garbage")))
	const garbage = 200
	msgs := make([]pulsartest.Message, garbage)
	for i := range msgs {
		msgs[i] = pulsartest.Message{Payload: []byte("not json")}
		if i%2 == 1 {
			msgs[i] = pulsartest.Message{Payload: []byte(`"json"`), Properties: map[string]string{pulsartopology.PropShard: "-1"}}
		}
	}
	if _, err := br.Publish(ctxT(t), full("garbage"), msgs...); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(ctxT(t), topology.Letter[string]{Value: "good"}); err != nil {
		t.Fatal(err)
	}
	buf := make([]topology.Letter[string], 1)
	if n, err := r.Receive(ctxT(t), buf); err != nil || n != 1 || buf[0].Value != "good" {
		t.Fatalf("Receive: %d %+v, %v; want the letter \"good\"", n, buf[0], err)
	}
	topologytest.MustClose(t, "the reader", r.Close)
	all := func() string { return strings.Join(lines.All(), "") }
	if n := r.(topology.UndecodableCounter).Undecodable(); n != garbage {
		t.Fatalf("Undecodable() = %d, want %d", n, garbage)
	}
	if records, told := lines.Told("does not decode"); records > 3 || told != garbage {
		t.Errorf("%d lines telling of %d messages, want at most 3 telling of %d:\n%s", records, told, garbage, all())
	}
	if lines.Count("does not decode", "topic="+full("garbage"), logburst.HeldBackKey+"=", "held_back_first=", "held_back_last=") == 0 {
		t.Errorf("no line names the ids of the messages held back:\n%s", all())
	}
}
