package pulsartopic_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: when the broker drops every connection, a balanced member
// reconnects on its own and the group still receives every message: what
// was not acked before the drop comes again, and what is published after
// it arrives.
func TestMemberSurvivesDroppedConnections(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	h := newHandle(t, be, "t", topic.Options{})
	sub := subscribe(t, h, topic.Balanced("g"))
	for i := range 20 {
		if err := h.Publish(ctxT(t), i); err != nil {
			t.Fatal(err)
		}
	}
	seen := make(map[int]bool)
	for range 10 {
		it, err := sub.Receive(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		seen[it.Value] = true
		_ = sub.Ack(it.ID)
	}
	before := b.Stats()
	b.DropConnections()
	// Published through the broker's API: pulsar-client-go (v0.21.0)'s
	// producer races in its reconnect path when it sends while reconnecting.
	codec := topic.IntCodec{}
	for i := 20; i < 40; i++ {
		payload, _ := codec.Encode(i)
		if _, err := b.Publish(ctxT(t), be.TopicName("t"), pulsartest.Message{Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	for len(seen) < 40 {
		it, err := sub.Receive(ctxT(t))
		if err != nil {
			t.Fatalf("Receive after the connections dropped: %v (%d of 40 seen)", err, len(seen))
		}
		seen[it.Value] = true
		_ = sub.Ack(it.ID)
	}
	wait.Within(t, patience, "the group's backlog to empty", func() bool { return b.Backlog(be.TopicName("t"), "g") == 0 })
	testbroker.PulsarReopened(t, b, before)
}
