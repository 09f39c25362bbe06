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

// A message delivered before gets its own Metadata, the slot's with its
// Redeliveries count; one delivered for the first time shares the
// slot's.
func TestConvertCarriesRedeliveries(t *testing.T) {
	s := &Source[int]{log: slog.New(slog.DiscardHandler)}
	md := &Metadata{Topic: "t", Member: 2}
	items := []topic.Item[int]{{ID: 1, Value: 1, Redeliveries: 3}, {ID: 2, Value: 2}}
	ptrs := s.convert(nil, md, items, nil)
	if len(ptrs) != 2 {
		t.Fatalf("%d messages from 2 items", len(ptrs))
	}
	if got := ptrs[0].Metadata.(*Metadata); got == md || got.Topic != "t" || got.Member != 2 || got.Redeliveries != 3 || got.Headers != nil {
		t.Errorf("message delivered 3 times before has metadata %+v, want its own with topic t, member 2 and 3 redeliveries", got)
	}
	if got := ptrs[1].Metadata.(*Metadata); got != md {
		t.Errorf("message delivered for the first time has metadata %+v, want the slot's shared one", got)
	}
}
