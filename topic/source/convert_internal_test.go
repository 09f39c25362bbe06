package source

import (
	"log/slog"
	"testing"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
)

// Turning received items into messages costs one allocation per batch
// (the messages) when no item carries headers, and exactly one more (their
// Metadata) when some do.
func TestConvertAllocatesForHeadersOnlyWhenPresent(t *testing.T) {
	s := &Source[int]{opts: Options[int]{}, log: slog.New(slog.DiscardHandler)}
	md := &Metadata{Topic: "t"}
	hdr := topic.Headers{"k": "v"}
	ptrs := make([]*message.Message[int], 0, 8)
	for _, c := range []struct {
		name  string
		hdr   topic.Headers
		wantN float64
	}{{"without", nil, 1}, {"with", hdr, 2}} {
		items := make([]topic.Item[int], 8)
		allocs := testing.AllocsPerRun(200, func() {
			for i := range items {
				items[i] = topic.Item[int]{ID: topic.MessageID(i + 1), Value: i}
				if i%2 == 0 {
					items[i].Headers = c.hdr
				}
			}
			ptrs = s.convert(nil, md, items, ptrs[:0])
		})
		if allocs != c.wantN {
			t.Errorf("%s headers: %v allocations per batch, want %v", c.name, allocs, c.wantN)
		}
		for i, m := range ptrs {
			got := m.Metadata.(*Metadata)
			switch {
			case i%2 == 1 || c.hdr == nil:
				if got != md {
					t.Errorf("%s headers: message %d has metadata %+v, want the slot's shared one", c.name, i, got)
				}
			case got == md || got.Topic != "t" || got.Headers.Get("k") != "v":
				t.Errorf("%s headers: message %d has metadata %+v, want its own with topic t and the headers", c.name, i, got)
			}
		}
	}
}
