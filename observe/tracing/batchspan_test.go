package tracing_test

import (
	"context"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe/tracing"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
)

// instrumented returns the handlers Instrument makes of echo and noBatch
// for a pipeline called "direct" with one batcher, recording to r.
func instrumented(t *testing.T, r recorded) (processor.Handler[int, int], batcher.Handler[int]) {
	t.Helper()
	opts, err := tracing.Instrument(pipeline.Options[int, int]{
		Name:       "direct",
		Processors: processor.Options[int, int]{Handle: echo[int]},
		Batchers:   []batcher.Options[int]{{Name: "default", Handle: noBatch[int]}},
	}, tracing.Options{TracerProvider: r.tp})
	if err != nil {
		t.Fatal(err)
	}
	return opts.Processors.Handle, opts.Batchers[0].Handle
}

// Guarantee: a batch span is a new root even when the batch handler's
// context carries a span (the pipeline was started under one), and it
// names the batch key of a keyed batch.
func TestBatchSpanIsARootNamingItsBatchKey(t *testing.T) {
	r := newRecorded(t)
	_, handle := instrumented(t, r)
	ctx, outer := r.tp.Tracer("app").Start(context.Background(), "startup")
	m := message.New(1, acker.NewRecorder(false), 1)
	if err := handle(ctx, []*message.Message[int]{m}, message.BatchInfo{Batcher: "default", BatchKey: "eu", Size: 1}); err != nil {
		t.Fatal(err)
	}
	outer.End()
	batches := spansNamed(r, "direct.batcher.default")
	if len(batches) != 1 {
		t.Fatalf("%d batch spans, want 1", len(batches))
	}
	b := batches[0]
	if b.Parent().IsValid() {
		t.Errorf("batch span is a child of %v, want a new root", b.Parent().SpanID())
	}
	if key := attrs(b)[tracing.AttrBatchKey].AsString(); key != "eu" {
		t.Errorf("batch span's batch key %q, want \"eu\"", key)
	}
}

// Guarantee: a message whose ack data is a value that cannot be compared
// (a byte slice, say) is traced, and its batch span linked, like any other.
func TestMessageWithUncomparableAckDataIsTraced(t *testing.T) {
	r := newRecorded(t)
	handle, batch := instrumented(t, r)
	m := message.New(1, acker.NewRecorder(false), 1)
	m.SetAckData([]byte("receipt"))
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("tracing a message with []byte ack data panicked: %v", p)
		}
	}()
	if _, err := handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if err := batch(context.Background(), []*message.Message[int]{m}, message.BatchInfo{Batcher: "default", Size: 1}); err != nil {
		t.Fatal(err)
	}
	procs, batches := spansNamed(r, "direct.processor"), spansNamed(r, "direct.batcher.default")
	if len(procs) != 1 || len(batches) != 1 {
		t.Fatalf("%d message spans and %d batch spans, want 1 and 1", len(procs), len(batches))
	}
	if l := batches[0].Links(); len(l) != 1 || !l[0].SpanContext.Equal(procs[0].SpanContext()) {
		t.Fatalf("batch span links %v, want the message's span", l)
	}
}
