package claim

import "testing"

// Guarantee: a skipped offset (a transaction marker) counts as handled
// without an outcome: the handled prefix does not pass it while a record
// delivered before it waits for its outcome, moves past it once that
// record is handled, and past a skipped offset with nothing before it at
// once.
func TestSkippedOffsetIsCommittedPastOnceTheRecordsBeforeItAreHandled(t *testing.T) {
	p, sess := newTestPartition(FailureCommit, 2)
	p.Skip(2)
	if got := sess.last(); got != -1 {
		t.Fatalf("marked %d with records 0 and 1 in flight, want nothing marked: nothing handled", got)
	}
	p.Ack(t.Context(), outcomes(0, 1), nil)
	if got := sess.last(); got != 3 {
		t.Fatalf("marked %d once records 0 and 1 were handled, want 3: past the skipped offset 2", got)
	}
	p.Skip(5)
	if got := sess.last(); got != 6 {
		t.Fatalf("marked %d after offset 5 was skipped with nothing in flight, want 6", got)
	}
	if n := p.Pending(); n != 0 {
		t.Fatalf("%d offsets pending once everything was handled, want 0", n)
	}
}

// Guarantee: once the closed feed refused a delivery, a later skipped
// offset does not move the commit past the refused records: they were not
// handled, and the next owner reads them.
func TestSkipAfterARefusedDeliveryDoesNotCommitPastTheRefusedRecords(t *testing.T) {
	c := closedClaim(t, "refused-skip")
	Deliver(c, []int64{0, 1, 2}, func(o int64) Record { return Record{Offset: o, Value: []byte("v")} },
		func(dst []Header, _ int64) []Header { return dst })
	c.Skip(3)
	if got := c.Committable(); got != 0 {
		t.Fatalf("committable %d after records 0-2 were refused and offset 3 skipped, want 0: the refused records are not handled", got)
	}
}
