package claim

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
)

// failedOutcome is an ordinary failure of the message at id.
func failedOutcome(id uint64, d acker.Disposition) acker.Outcome {
	return acker.Outcome{ID: id, Err: errors.New("fails"), Disposition: d}
}

// Guarantee: under FailureRedeliver a failed message is not handled: the
// commit stays below it while the messages after it are handled, the
// claim's reader is woken to rewind, and the rewind goes to the lowest
// failed offset, forgetting the offsets from it on (they are fetched
// again and tracked anew).
func TestRedeliveredFailureHoldsTheCommitAndRewindsToTheLowest(t *testing.T) {
	p, sess := newTestPartition(FailureRedeliver, 8)
	p.Ack(t.Context(), outcomes(0, 1, 3, 4, 6, 7),
		[]acker.Outcome{failedOutcome(5, acker.DispositionDefault), failedOutcome(2, acker.DispositionDefault)})
	if got := sess.last(); got != 2 {
		t.Fatalf("marked %d, want 2: offset 2 failed and is to be delivered again", got)
	}
	select {
	case <-p.RetryCh:
	default:
		t.Fatal("the claim's reader was not woken to redeliver the failed messages")
	}
	if at := p.TakeRetry(); at != 2 {
		t.Fatalf("TakeRetry = %d, want 2, the lowest failed offset", at)
	}
	if n := p.Pending(); n != 0 {
		t.Fatalf("%d offsets still waited for after the rewind to 2, want none: they are fetched again", n)
	}
	// The rewound records are tracked anew, and their handling moves the
	// commit past them.
	for off := range uint64(8) {
		if off >= 2 {
			p.cp.Track(off)
		}
	}
	p.Ack(t.Context(), outcomes(2, 3, 4, 5, 6, 7), nil)
	if got := sess.last(); got != 8 {
		t.Fatalf("marked %d once the redelivered records were handled, want 8", got)
	}
}

// Guarantee: the commit stays below an offset the shutdown interrupted
// even once records above it are tracked and handled afterwards (the
// read-ahead the claim still delivers while the pipeline stops), and two
// interruptions in one call hold it below the lower one.
func TestInterruptionHoldsTheCommitBelowLaterHandledRecords(t *testing.T) {
	p, sess := newTestPartition(FailureCommit, 10)
	p.Ack(t.Context(), outcomes(0, 1, 2), []acker.Outcome{interruptedOutcome(6, acker.DispositionDefault),
		interruptedOutcome(3, acker.DispositionDefault)})
	p.Ack(t.Context(), outcomes(4, 5), nil)
	p.cp.Track(10)
	p.cp.Track(11)
	p.Ack(t.Context(), outcomes(10, 11), nil)
	if got := p.Committable(); got != 3 {
		t.Fatalf("Committable = %d, want 3: offset 3 was interrupted by the shutdown", got)
	}
	if got := sess.last(); got > 3 {
		t.Fatalf("marked %d, past the interrupted offset 3", got)
	}
	if n := p.Pending(); n != 0 {
		t.Fatalf("the claim still waits for %d records from the interrupted offset 3 on", n)
	}
}

// Guarantee: outcomes that reach a claim after its release no longer move
// its offset: the release's final commit has gone out, and the partition
// may be another member's.
func TestOutcomesAfterTheReleaseDoNotMoveTheOffset(t *testing.T) {
	p, sess := newTestPartition(FailureCommit, 4)
	p.Ack(t.Context(), outcomes(0), nil)
	p.Release(discard, 0, nil)
	p.Ack(t.Context(), outcomes(1, 2, 3), nil)
	if got := sess.last(); got != 1 {
		t.Fatalf("marked %d after outcomes that came after the release, want 1", got)
	}
	if got := p.Marked.Load(); got != 1 {
		t.Fatalf("Marked = %d after outcomes that came after the release, want 1", got)
	}
}

// Guarantee: a release waits for the claim's last outcome, and returns as
// soon as it arrives rather than at its timeout, even when the claim had
// settled once before further records were delivered.
func TestReleaseReturnsOnTheLastOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newTestPartition(FailureCommit, 2)
		p.Ack(t.Context(), outcomes(0, 1), nil) // settled
		p.cp.Track(2)
		start := time.Now()
		released := make(chan struct{})
		go func() {
			defer close(released)
			p.Release(discard, time.Hour, nil)
		}()
		synctest.Wait()
		select {
		case <-released:
			t.Fatal("the release returned with offset 2 in flight")
		default:
		}
		p.Ack(context.Background(), outcomes(2), nil)
		<-released
		if d := time.Since(start); d != 0 {
			t.Fatalf("the release returned %v after the last outcome, want at once", d)
		}
		if got := p.Marked.Load(); got != 3 {
			t.Fatalf("Marked = %d, want 3", got)
		}
	})
}

// Guarantee: the failure of a message whose offset a rewind already
// dropped (an outcome of the delivery before the rewind, arriving late)
// asks for no second rewind: the records from that offset on are being
// fetched again anyway.
func TestALateFailureOfARewoundRecordAsksForNoRewind(t *testing.T) {
	p, _ := newTestPartition(FailureRedeliver, 5)
	p.Ack(t.Context(), outcomes(0, 1), []acker.Outcome{failedOutcome(2, acker.DispositionDefault)})
	if at := p.TakeRetry(); at != 2 {
		t.Fatalf("TakeRetry = %d, want 2", at)
	}
	<-p.RetryCh
	p.Ack(t.Context(), nil, []acker.Outcome{failedOutcome(3, acker.DispositionDefault)})
	if at := p.RetryAt(); at != -1 {
		t.Fatalf("RetryAt = %d after a late failure of an offset the rewind dropped, want -1", at)
	}
	select {
	case <-p.RetryCh:
		t.Fatal("a late failure of an offset the rewind dropped woke the reader to rewind again")
	default:
	}
}
