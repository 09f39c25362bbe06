package source_test

import (
	"context"
	"maps"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// A message published with headers carries them in its Metadata, beside
// the topic, mode and member every message of its subscription has; a
// message published without headers has none.
func TestHeadersLandInMetadata(t *testing.T) {
	h := newTopic(t, "headed", topic.Options{})
	src := newSource(t, h, topic.Balanced("g"))
	var mu sync.Mutex
	got := map[int]source.Metadata{}
	downstream(t, "b", src, 1, func(_ context.Context, m *message.Message[int]) (int, error) {
		md, ok := message.MetadataAs[*source.Metadata](m)
		if !ok {
			t.Errorf("message %d metadata %T, want *source.Metadata", m.Data, m.Metadata)
			return 0, nil
		}
		mu.Lock()
		got[m.Data] = *md
		mu.Unlock()
		return m.Data, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	hdr := topic.Headers{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	for v := range 4 {
		var with topic.Headers
		if v%2 == 0 {
			with = hdr
		}
		if _, err := h.PublishWithHeaders(ctx, v, with, topic.Block); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "every message handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 4 })
	mu.Lock()
	defer mu.Unlock()
	for v, md := range got {
		if md.Topic != "headed" || md.Mode != topic.Balanced("g") || md.Member != 0 {
			t.Errorf("message %d metadata %+v, want topic headed, group g, member 0", v, md)
		}
		if v%2 == 0 && !maps.Equal(md.Headers, hdr) {
			t.Errorf("message %d headers %v, want %v", v, md.Headers, hdr)
		}
		if v%2 == 1 && md.Headers != nil {
			t.Errorf("message %d published without headers has %v", v, md.Headers)
		}
	}
}

// A message's Metadata describes it for the pipeline's failure lines: its
// topic and subscription, and, for a message delivered before, how many
// times, so that a line about a message that keeps failing says so.
func TestMetadataLogValueCountsRedeliveries(t *testing.T) {
	for _, c := range []struct {
		md   source.Metadata
		want string
	}{
		{source.Metadata{Topic: "orders", Mode: topic.Balanced("billing")}, "[topic=orders subscription=billing]"},
		{source.Metadata{Topic: "orders", Mode: topic.Broadcast(), Redeliveries: 4}, "[topic=orders subscription=broadcast redeliveries=4]"},
	} {
		if got := c.md.LogValue().String(); got != c.want {
			t.Errorf("LogValue of %+v = %s, want %s", c.md, got, c.want)
		}
	}
}
