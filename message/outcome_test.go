package message_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: the outcome of a message that has not failed carries
// DispositionDefault, whatever disposition was set on it; the disposition
// only applies once the message fails.
func TestOutcomeOfSuccessfulMessageHasDefaultDisposition(t *testing.T) {
	m := message.New(1, nil, 1)
	m.SetDisposition(acker.DispositionDiscard)
	if o := m.Outcome(); o.Err != nil || o.Disposition != acker.DispositionDefault {
		t.Fatalf("Outcome() of a successful message = %+v, want no error and DispositionDefault", o)
	}
	m.Fail(errors.New("bad"))
	if o := m.Outcome(); o.Disposition != acker.DispositionDiscard {
		t.Fatalf("Outcome() once failed = %+v, want DispositionDiscard", o)
	}
}

// Guarantee: Transfer carries a failed message's status, error and
// disposition to the Out message, so its outcome is still a failure.
func TestTransferKeepsFailure(t *testing.T) {
	boom := errors.New("boom")
	in := message.New("x", nil, 3)
	in.Fail(boom)
	in.SetDisposition(acker.DispositionRetry)
	var out message.Message[int]
	message.Transfer(&out, in, 0)
	if !out.Failed() || out.Status() != message.StatusFailed || out.Err() != boom || out.Disposition() != acker.DispositionRetry {
		t.Fatalf("transferred: %v disposition %v, want failed with boom, retry", &out, out.Disposition())
	}
	if o := out.Outcome(); o.ID != 3 || o.Err != boom || o.Disposition != acker.DispositionRetry {
		t.Fatalf("Outcome() = %+v, want id 3 failed with boom, retry", o)
	}
}

// Guarantee: Init resets a reused message completely: metadata, ack data,
// routing, batch mode, status, error and disposition of its previous life
// are gone.
func TestInitResetsReusedMessage(t *testing.T) {
	rec := acker.NewRecorder(false)
	m := message.New(1, nil, 1)
	m.Metadata = &kafkaMeta{Partition: 1}
	m.SetAckData("ledger:1")
	m.SetBatcher("s3")
	m.SetBatchKey("customer-1")
	m.SetBatchMode(message.Flush)
	m.Fail(errors.New("old"))
	m.SetDisposition(acker.DispositionRetry)

	m.Init(2, rec, 7)
	a, id, data := m.Acknowledger()
	if m.Data != 2 || m.Metadata != nil || a != acker.Acknowledger(rec) || id != 7 || data != nil {
		t.Fatalf("after Init: data %v metadata %v acknowledger %v id %d ack data %v", m.Data, m.Metadata, a, id, data)
	}
	if m.Batcher() != message.DefaultBatcher || m.BatchKey() != "" || m.BatchMode() != message.Bulk ||
		m.Failed() || m.Err() != nil || m.Disposition() != acker.DispositionDefault {
		t.Fatalf("after Init: %v disposition %v, want a fresh message", m, m.Disposition())
	}
}

// Guarantee: SetDisposition with a value that is not one of acker's
// dispositions stores DispositionDefault, so the acknowledger receives
// DispositionDefault and the source applies its documented failure policy
// (as it would had no disposition been set), never an unnamed value.
func TestUnknownDispositionIsTheSourceDefault(t *testing.T) {
	rec := acker.NewRecorder(false)
	m := message.New(1, rec, 9)
	m.Fail(errors.New("bad"))
	for _, unknown := range []acker.Disposition{acker.DispositionDiscard + 1, 200} {
		m.SetDisposition(acker.DispositionDiscard)
		m.SetDisposition(unknown)
		if d := m.Disposition(); d != acker.DispositionDefault {
			t.Fatalf("Disposition() after SetDisposition(%d) = %v, want default", unknown, d)
		}
	}
	if o := m.Outcome(); o.Disposition != acker.DispositionDefault {
		t.Fatalf("Outcome() after SetDisposition(200) = %+v, want DispositionDefault", o)
	}
	var g acker.Group
	m.AddTo(&g)
	g.Flush(context.Background(), nil)
	if f := rec.Failed(); len(f) != 1 || f[0].ID != 9 || f[0].Disposition != acker.DispositionDefault {
		t.Fatalf("acknowledger received %+v, want message 9 failed with DispositionDefault", f)
	}
}

// Guarantee: SetBatchMode with a value other than Bulk and Flush stores
// Bulk, so the message's batch grows until its size or timeout, and
// BatchMode and String agree on it.
func TestUnknownBatchModeIsBulk(t *testing.T) {
	m := message.New(1, nil, 1)
	for _, unknown := range []message.BatchMode{message.Flush + 1, 99} {
		m.SetBatchMode(message.Flush)
		m.SetBatchMode(unknown)
		if mode := m.BatchMode(); mode != message.Bulk {
			t.Fatalf("BatchMode() after SetBatchMode(%d) = %d, want Bulk", unknown, mode)
		}
	}
	if !strings.Contains(m.String(), "mode=bulk") {
		t.Fatalf("String() = %s, want mode=bulk", m)
	}
}

// Guarantee: the copy Detach makes of a message acknowledged immediately
// holds nothing its source may reuse once the outcome is reported: no
// Metadata, acknowledger or ack data. A batch handler reading the copy
// never sees what the source set for a later record.
func TestDetachedCopyHoldsNothingItsSourceMayReuse(t *testing.T) {
	rec := acker.NewRecorder(false)
	src := message.New("x", rec, 4)
	src.Metadata = &kafkaMeta{Partition: 2}
	src.SetAckData("ledger:4")
	src.AckImmediately()
	var dst message.Message[string]
	message.Detach(&dst, src, "y")
	if dst.Metadata != nil {
		t.Fatalf("detached copy carries its source's Metadata %v", dst.Metadata)
	}
	if a, id, data := dst.Acknowledger(); a != acker.Discard || data != nil || id != 4 {
		t.Fatalf("detached copy: acknowledger %v id %d ack data %v, want Discard, 4, none", a, id, data)
	}
	src.Reuse("z", 5)
	src.Metadata = &kafkaMeta{Partition: 3}
	if dst.Metadata != nil || dst.Data != "y" {
		t.Fatalf("detached copy follows its reused source: metadata %v data %q", dst.Metadata, dst.Data)
	}
}

// Guarantee: AddTo adds nothing for a deferred message, whose outcome is
// its deferrer's to report, nor for the copy of a message acknowledged
// immediately, even once that copy fails in its batch.
func TestAddToLeavesOutcomesThatAreNotTheStagesToReport(t *testing.T) {
	rec := acker.NewRecorder(false)
	var g acker.Group
	deferred := message.New(1, rec, 1)
	deferred.Defer()
	deferred.AddTo(&g)
	deferred.Fail(errors.New("after the deferral"))
	deferred.AddTo(&g)

	src := message.New(2, rec, 2)
	src.AckImmediately()
	var copied message.Message[int]
	message.Detach(&copied, src, 2)
	copied.AddTo(&g)
	copied.Fail(errors.New("in its batch"))
	copied.AddTo(&g)

	if n := g.Len(); n != 0 {
		t.Fatalf("AddTo added %d outcomes, want none", n)
	}
	g.Flush(context.Background(), nil)
	if rec.Total() != 0 {
		t.Fatalf("acknowledger got %+v, want nothing", rec.Calls())
	}
}
