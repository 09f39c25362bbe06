package tracing

import (
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/boulevard-go/boulevard/acker"
)

// The table of span contexts waiting for their batch never holds more than
// MaxPending entries, keeps the most recent ones, and drops the oldest.
func TestLinkTableIsBoundedAndKeepsTheRecent(t *testing.T) {
	l := newLinkTable(4)
	ack := acker.NewRecorder(false)
	sc := func(i int) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{byte(i + 1)}})
	}
	for i := range 10 {
		l.remember(linkKey{ack: ack, id: uint64(i)}, sc(i))
		if n := l.size(); n > 4 {
			t.Fatalf("after %d entries the table holds %d, more than 4", i+1, n)
		}
	}
	for i := 8; i < 10; i++ {
		got, ok := l.take(linkKey{ack: ack, id: uint64(i)})
		if !ok || !got.Equal(sc(i)) {
			t.Errorf("entry %d: got %v %v, want it kept", i, got, ok)
		}
	}
	if _, ok := l.take(linkKey{ack: ack}); ok {
		t.Error("the oldest entry is still there")
	}
	if _, ok := l.take(linkKey{ack: ack, id: 9}); ok {
		t.Error("an entry was taken twice")
	}
}

// MaxPending 1, which Validate accepts, bounds the table to one entry too.
func TestLinkTableOfOneHoldsOneEntry(t *testing.T) {
	l := newLinkTable(1)
	ack := acker.NewRecorder(false)
	for i := range 3 {
		l.remember(linkKey{ack: ack, id: uint64(i)}, trace.SpanContext{})
		if n := l.size(); n > 1 {
			t.Fatalf("after %d entries the table holds %d, more than MaxPending 1", i+1, n)
		}
	}
}
