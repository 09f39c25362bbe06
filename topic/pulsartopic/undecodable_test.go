package pulsartopic_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a burst of messages that do not decode is logged in a few
// lines: the first in full, the rest counted (held_back, with the ids of
// the first and the last held back) and said when the subscription
// closes; every message is counted in Stats().Undecodable and acked.
func TestABurstOfUndecodableMessagesIsLoggedInAFewLines(t *testing.T) {
	b := testbroker.Pulsar(t)
	var lines logtest.Lines
	o := testOptions[int](b, topic.IntCodec{})
	o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
	be := newBackend(t, o)
	h := newHandle(t, be, "t", topic.Options{})
	sub := subscribe(t, h, topic.Balanced("g"))
	const garbage = 200
	msgs := make([]pulsartest.Message, garbage)
	for i := range msgs {
		msgs[i] = pulsartest.Message{Payload: []byte("not an int")}
	}
	if _, err := b.Publish(ctxT(t), be.TopicName("t"), msgs...); err != nil {
		t.Fatal(err)
	}
	if err := h.Publish(ctxT(t), 9); err != nil {
		t.Fatal(err)
	}
	it, err := sub.Receive(ctxT(t))
	if err != nil || it.Value != 9 {
		t.Fatalf("Receive = %+v, %v; want 9", it, err)
	}
	sub.Close()
	all := func() string { return strings.Join(lines.All(), "") }
	if n := h.Stats().Undecodable; n != garbage {
		t.Fatalf("Stats().Undecodable = %d, want %d", n, garbage)
	}
	if records, told := lines.Told("cannot decode"); records > 3 || told != garbage {
		t.Errorf("%d lines telling of %d messages, want at most 3 telling of %d:\n%s", records, told, garbage, all())
	}
	if lines.Count("cannot decode", "partition_topic="+be.TopicName("t"), logburst.HeldBackKey+"=", "held_back_first=", "held_back_last=") == 0 {
		t.Errorf("no line names the ids of the messages held back:\n%s", all())
	}
}
