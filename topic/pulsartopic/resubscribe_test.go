package pulsartopic_test

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// Guarantee: each time a broadcast subscriber's consumer subscribes again
// after its connection dropped (once per topic partition), the topic's
// Stats().BroadcastResubscribes counts it and a WARN line names the topic
// and the subscription; a subscriber that never lost its connection counts
// nothing and logs nothing.
func TestABroadcastResubscriptionIsCountedAndLogged(t *testing.T) {
	const drops = 3
	for _, partitions := range []int{0, 2} {
		t.Run(fmt.Sprintf("partitions=%d", partitions), func(t *testing.T) {
			b := testbroker.Pulsar(t)
			var lines logtest.Lines
			o := testOptions[int](b, topic.IntCodec{})
			o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
			o.Partitions = partitions
			be := newBackend(t, o)
			h := newHandle(t, be, "audit", topic.Options{Mode: topic.BroadcastOnly})
			sub := subscribe(t, h, topic.Broadcast())
			consumers := max(partitions, 1)
			full := be.TopicName("audit")
			const msg = "broadcast subscriber subscribed again after losing its connection"
			// roundTrip publishes v on every partition and waits for the
			// subscriber to receive them: its consumers are subscribed, and
			// the notices that came before those messages were heard.
			roundTrip := func(v int) {
				t.Helper()
				payload, _ := topic.IntCodec{}.Encode(v)
				names := []string{full}
				if partitions > 0 {
					names = names[:0]
					for p := range partitions {
						names = append(names, fmt.Sprintf("%s-partition-%d", full, p))
					}
				}
				for _, name := range names {
					if _, err := b.Publish(ctxT(t), name, pulsartest.Message{Payload: payload}); err != nil {
						t.Fatal(err)
					}
				}
				for got := 0; got < len(names); {
					it, err := sub.Receive(ctxT(t))
					if err != nil {
						t.Fatalf("Receive: %v", err)
					}
					_ = sub.Ack(it.ID)
					if it.Value == v {
						got++
					}
				}
			}
			roundTrip(-1)
			if n := h.Stats().BroadcastResubscribes; n != 0 {
				t.Errorf("BroadcastResubscribes = %d before any drop, want 0", n)
			}
			lines.Want(t, 0, "resubscription lines before any drop", msg)
			before := b.Stats()
			if before.ConsumersOpen != consumers {
				t.Fatalf("%d consumers open, want the subscriber's %d", before.ConsumersOpen, consumers)
			}
			for d := 1; d <= drops; d++ {
				b.DropConnections()
				testbroker.PulsarReopened(t, b, before)
				roundTrip(d)
				if n, want := h.Stats().BroadcastResubscribes, uint64(d*consumers); n != want {
					t.Fatalf("BroadcastResubscribes = %d after %d drops of %d consumers, want %d", n, d, consumers, want)
				}
			}
			sub.Close() // logs what its lines held back
			records, events := lines.Told(msg, "topic="+full, "subscription="+pulsartopic.BroadcastPrefix, "level=WARN")
			if records == 0 || events != drops*consumers {
				t.Errorf("%d WARN records telling of %d resubscriptions, want them to tell of %d:\n%v", records, events, drops*consumers, lines.All())
			}
		})
	}
}
