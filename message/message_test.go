package message_test

import (
	"errors"
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type kafkaMeta struct{ Partition int32 }

// Guarantee: a new message routes to the default batcher in bulk mode, is
// not failed, and carries its acknowledger, id and ack data.
func TestNewMessageDefaults(t *testing.T) {
	rec := acker.NewRecorder(true)
	m := message.New("payload", rec, 42)
	m.SetAckData("ledger:1")
	if m.Batcher() != message.DefaultBatcher || m.BatchKey() != "" || m.BatchMode() != message.Bulk || m.Failed() || m.Err() != nil {
		t.Fatalf("defaults: %v", m)
	}
	a, id, data := m.Acknowledger()
	if a != acker.Acknowledger(rec) || id != 42 || data != "ledger:1" {
		t.Fatalf("Acknowledger() = %v %d %v", a, id, data)
	}
	o := m.Outcome()
	if o.ID != 42 || o.Data != "ledger:1" || o.Err != nil || o.Message != any(m) {
		t.Fatalf("Outcome() = %+v", o)
	}
	if a, _, _ := message.New(1, nil, 0).Acknowledger(); a != acker.Discard {
		t.Fatal("a message without acknowledger must report acker.Discard")
	}
}

// Guarantee: Fail records the error (ErrFailed for nil) and the outcome
// carries it with the disposition.
func TestFail(t *testing.T) {
	m := message.New(1, nil, 1)
	m.Fail(nil)
	if !m.Failed() || !errors.Is(m.Err(), message.ErrFailed) || m.Status() != message.StatusFailed {
		t.Fatalf("Fail(nil): %v", m)
	}
	boom := errors.New("boom")
	m.Fail(boom)
	m.SetDisposition(acker.DispositionRetry)
	o := m.Outcome()
	if o.Err != boom || o.Disposition != acker.DispositionRetry {
		t.Fatalf("Outcome() = %+v", o)
	}
}

// Guarantee: Transfer carries metadata, acknowledgement and routing from an
// In message to an Out message with a new payload.
func TestTransfer(t *testing.T) {
	rec := acker.NewRecorder(false)
	in := message.New([]byte("7"), rec, 9)
	in.Metadata = &kafkaMeta{Partition: 3}
	in.SetBatcher("s3")
	in.SetBatchKey("customer-1")
	in.SetBatchMode(message.Flush)
	var out message.Message[int]
	message.Transfer(&out, in, 7)
	a, id, _ := out.Acknowledger()
	md, ok := message.MetadataAs[*kafkaMeta](&out)
	if out.Data != 7 || a != acker.Acknowledger(rec) || id != 9 || !ok || md.Partition != 3 ||
		out.Batcher() != "s3" || out.BatchKey() != "customer-1" || out.BatchMode() != message.Flush {
		t.Fatalf("transferred: %v", &out)
	}
	if _, ok := message.MetadataAs[string](&out); ok {
		t.Fatal("MetadataAs must report a type mismatch")
	}
}

// Guarantee: PanicError unwraps to a panicked error value.
func TestPanicErrorUnwrap(t *testing.T) {
	base := errors.New("base")
	if pe := (&message.PanicError{Value: fmt.Errorf("wrapped: %w", base)}); !errors.Is(pe, base) {
		t.Fatal("PanicError must unwrap an error value")
	}
	if pe := (&message.PanicError{Value: "text"}); pe.Unwrap() != nil || pe.Error() != "panic: text" {
		t.Fatalf("%v", pe)
	}
}

func TestStrings(t *testing.T) {
	if message.TriggerSize.String() != "size" || message.TriggerTimeout.String() != "timeout" || message.TriggerFlush.String() != "flush" {
		t.Fatal("trigger names")
	}
	m := message.New(1, nil, 5)
	m.Fail(errors.New("x"))
	if got := m.String(); got != `message{id=5 batcher="default" key="" mode=bulk status=failed err="x"}` {
		t.Fatalf("String() = %s", got)
	}
}

// Guarantee: Reuse clears what stages set on the previous message (status,
// error, disposition, routing, deferral, a request for immediate
// acknowledgement) and keeps what the source set
// (acknowledger, ack data, metadata, partition key), without allocating.
func TestReuse(t *testing.T) {
	ack := acker.NewRecorder(false)
	type md struct{ n int }
	meta := &md{1}
	m := message.New("first", ack, 1)
	m.SetAckData("slot")
	m.Metadata = meta
	m.SetPartitionKey("t/0")
	m.Fail(errors.New("boom"))
	m.SetDisposition(acker.DispositionRetry)
	m.SetBatcher("other")
	m.SetBatchKey("k")
	m.SetBatchMode(message.Flush)
	m.Defer()
	m.AckImmediately()

	m.Reuse("second", 2)
	if m.Data != "second" || m.Failed() || m.Err() != nil || m.Disposition() != acker.DispositionDefault ||
		m.Batcher() != message.DefaultBatcher || m.BatchKey() != "" || m.BatchMode() != message.Bulk || m.Deferred() || m.AckRequested() {
		t.Fatalf("after Reuse: %v data %q disposition %v deferred %v immediate ack %v", m, m.Data, m.Disposition(), m.Deferred(), m.AckRequested())
	}
	a, id, data := m.Acknowledger()
	if a != acker.Acknowledger(ack) || id != 2 || data != "slot" || m.Metadata != any(meta) || m.PartitionKey() != "t/0" {
		t.Fatalf("after Reuse: acknowledger %v id %d data %v metadata %v key %q", a, id, data, m.Metadata, m.PartitionKey())
	}
	if n := testing.AllocsPerRun(100, func() { m.Reuse("third", 3) }); n != 0 {
		t.Fatalf("Reuse allocates %v times", n)
	}
}
