package message_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: the outcome a stage reports for an interrupted message asks
// for a retry and keeps the shutdown in its error, whatever disposition a
// failure hook set.
func TestAStageReportsAnInterruptedMessageForRetry(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := acker.NewRecorder(false)
	m := message.New(1, rec, 1)
	m.Fail(ctx.Err())
	m.MarkInterrupted(ctx)
	m.SetDisposition(acker.DispositionDiscard)
	var g acker.Group
	m.AddTo(&g)
	g.Flush(context.Background(), nil)
	failed := rec.Failed()
	if len(failed) != 1 {
		t.Fatalf("acknowledger got %+v, want one failed outcome", rec.Calls())
	}
	if o := failed[0]; o.Disposition != acker.DispositionRetry || !acker.Interrupted(o) {
		t.Fatalf("reported outcome %+v, want an interrupted one with disposition retry", o)
	}
}

// Guarantee: a message stays interrupted, and MarkInterrupted keeps saying
// so, whatever context a later call is given.
func TestMarkInterruptedKeepsReportingAnInterruptedMessage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := message.New(1, nil, 1)
	m.Fail(ctx.Err())
	if !m.MarkInterrupted(ctx) {
		t.Fatal("not marked interrupted")
	}
	if !m.MarkInterrupted(context.Background()) {
		t.Fatal("MarkInterrupted with a live context reports an interrupted message as not interrupted")
	}
}

// Guarantee: Undefer gives a deferred message's outcome back to the
// pipeline: the stage reports it again.
func TestAnUndeferredMessageIsReportedByItsStage(t *testing.T) {
	rec := acker.NewRecorder(false)
	m := message.New(1, rec, 1)
	m.Defer()
	m.Undefer()
	if m.Deferred() {
		t.Fatal("Deferred after Undefer")
	}
	var g acker.Group
	m.AddTo(&g)
	g.Flush(context.Background(), nil)
	if rec.Count(1) != 1 {
		t.Fatalf("acknowledger got %+v, want the undeferred message's outcome", rec.Calls())
	}
}

// Guarantee: the AckImmediately function asks for an immediate
// acknowledgement of every message it is given, the first included.
func TestAckImmediatelyAsksItForEveryMessage(t *testing.T) {
	msgs := []*message.Message[int]{message.New(1, nil, 1), message.New(2, nil, 2), message.New(3, nil, 3)}
	message.AckImmediately(msgs...)
	for _, m := range msgs {
		if !m.AckRequested() {
			t.Errorf("message %d: AckRequested false after AckImmediately", m.Data)
		}
	}
}

// Guarantee: setting an empty partition key or batch key clears the one
// set before, also on a message whose rarely used fields are allocated.
func TestAnEmptyKeyClearsTheKeySetBefore(t *testing.T) {
	m := message.New(1, nil, 1)
	m.SetPartitionKey("p")
	m.SetBatchKey("b")
	m.SetPartitionKey("")
	m.SetBatchKey("")
	if m.PartitionKey() != "" || m.BatchKey() != "" {
		t.Fatalf("partition key %q, batch key %q after setting them empty, want both empty", m.PartitionKey(), m.BatchKey())
	}
}

// Guarantee: a panicking key function fails its message with a
// *PanicError, gives it the empty key and tells onPanic; a nil message gets
// the empty key without the key function being called.
func TestGuardKeyFailsTheMessageOfAPanickingKeyFunction(t *testing.T) {
	var told *message.PanicError
	key := message.GuardKey(func(m *message.Message[int]) string {
		if m.Data == 0 {
			panic("no key")
		}
		return "k"
	}, func(_ *message.Message[int], pe *message.PanicError) { told = pe })
	m := message.New(0, nil, 1)
	if k := key(m); k != "" {
		t.Fatalf("key %q for a message whose key function panicked, want empty", k)
	}
	var pe *message.PanicError
	if !errors.As(m.Err(), &pe) || pe.Value != "no key" || told != pe {
		t.Fatalf("message error %v, onPanic told %v: want the same *PanicError of the panic", m.Err(), told)
	}
	if k := key(nil); k != "" {
		t.Fatalf("key %q for a nil message, want empty", k)
	}
	if k := key(message.New(1, nil, 2)); k != "k" {
		t.Fatalf("key %q, want the key function's", k)
	}
}

// Guarantee: every batch trigger has its own name.
func TestTriggerNames(t *testing.T) {
	for tr, want := range map[message.Trigger]string{message.TriggerSize: "size", message.TriggerTimeout: "timeout",
		message.TriggerFlush: "flush", message.TriggerWeight: "weight"} {
		if tr.String() != want {
			t.Errorf("Trigger(%d).String() = %q, want %q", tr, tr.String(), want)
		}
	}
}

// Guarantee: the source part of a message's log value is resolved
// already, so that a handler that resolves only top-level attributes shows
// what the metadata says rather than a LogValuer.
func TestAMessagesLogValueResolvesItsSource(t *testing.T) {
	m := message.New(1, nil, 1)
	m.Metadata = &where{topic: "orders", offset: 42}
	for _, a := range m.LogValue().Group() {
		if a.Key == "source" {
			if k := a.Value.Kind(); k != slog.KindGroup {
				t.Fatalf("source is a %v value, want a resolved group", k)
			}
			return
		}
	}
	t.Fatal("no source attribute")
}

// Guarantee: the copy Detach makes of a message acknowledged immediately
// keeps what decides its way through the batch stage: its batch mode,
// status, routing and partition key.
func TestADetachedCopyKeepsItsWayThroughTheBatchStage(t *testing.T) {
	src := message.New(1, acker.NewRecorder(false), 1)
	src.SetBatchMode(message.Flush)
	src.SetBatcher("s3")
	src.SetBatchKey("eu")
	src.SetPartitionKey("p")
	src.AckImmediately()
	var dst message.Message[int]
	message.Detach(&dst, src, 2)
	if dst.BatchMode() != message.Flush || dst.Batcher() != "s3" || dst.BatchKey() != "eu" || dst.PartitionKey() != "p" {
		t.Fatalf("detached copy %v, partition key %q: want mode flush, batcher s3, key eu, partition key p", &dst, dst.PartitionKey())
	}
	failed := message.New(3, acker.NewRecorder(false), 3)
	failed.Fail(errors.New("in its processor"))
	message.Detach(&dst, failed, 4)
	if !dst.Failed() || dst.Err() == nil {
		t.Fatalf("detached copy of a failed message: %v, want it failed", &dst)
	}
}

// Guarantee: a message seen as a message.Keyed (by a pipeline's partition
// function) shows its source's Metadata.
func TestAKeyedMessageShowsItsMetadata(t *testing.T) {
	m := message.New(1, nil, 1)
	md := &where{topic: "orders"}
	m.Metadata = md
	var k message.Keyed = m
	if k.SourceMetadata() != md {
		t.Fatalf("SourceMetadata = %v, want the message's Metadata %v", k.SourceMetadata(), md)
	}
}
