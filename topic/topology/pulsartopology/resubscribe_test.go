package pulsartopology_test

import (
	"log/slog"
	"testing"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: each time a broadcast reader's consumer subscribes again
// after its connection dropped, the reader counts it
// (topology.ResubscribeCounter) and a WARN line (or the count of those
// held back, as the reader closes) names the topic and the subscription;
// a reader that never lost its connection counts and logs none.
func TestABroadcastReaderCountsAndLogsEachResubscription(t *testing.T) {
	const drops = 3
	br := testbroker.Pulsar(t)
	var lines logtest.Lines
	o := options(br, topic.Codec[int](topic.IntCodec{}))
	o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
	be := newBackend(t, o)
	_, r := declared(t, be, build(t, topology.New("audit").Broadcast()))
	const msg = "broadcast reader subscribed again after losing its connection"
	// roundTrip publishes v and waits for r to receive it: its consumer
	// is subscribed, and the notices that came before v were heard.
	roundTrip := func(v int) {
		t.Helper()
		// Through the broker's API: the producer's reconnection is not
		// the subject here.
		payload, _ := topic.IntCodec{}.Encode(v)
		if _, err := br.Publish(ctxT(t), be.TopicName("audit"), pulsartest.Message{Payload: payload}); err != nil {
			t.Fatal(err)
		}
		for {
			l := receiveLetter(t, r)
			if err := r.Settle(ctxT(t), &l); err != nil {
				t.Fatal(err)
			}
			if l.Value == v {
				return
			}
		}
	}
	roundTrip(-1)
	lines.Want(t, 0, "resubscription lines before any drop", msg)
	resubscribes := r.(topology.ResubscribeCounter).Resubscribes
	if n := resubscribes(); n != 0 {
		t.Errorf("Resubscribes() = %d before any drop, want 0", n)
	}
	before := br.Stats()
	if before.ConsumersOpen != 1 {
		t.Fatalf("%d consumers open, want the reader's 1", before.ConsumersOpen)
	}
	for d := 1; d <= drops; d++ {
		br.DropConnections()
		testbroker.PulsarReopened(t, br, before)
		roundTrip(d)
		if _, events := lines.Told(msg); events == 0 {
			t.Fatalf("no line tells of a resubscription after %d drops:\n%v", d, lines.All())
		}
		if n := resubscribes(); n != uint64(d) {
			t.Fatalf("Resubscribes() = %d after %d drops, want %d", n, d, d)
		}
	}
	topologytest.MustClose(t, "the reader", r.Close) // logs what its lines held back
	records, events := lines.Told(msg, "topic="+be.TopicName("audit"), "subscription="+pulsartopology.BroadcastPrefix, "level=WARN")
	if events != drops {
		t.Errorf("%d WARN records telling of %d resubscriptions, want them to tell of %d:\n%v", records, events, drops, lines.All())
	}
}
