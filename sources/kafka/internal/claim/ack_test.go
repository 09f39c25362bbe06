package claim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/acker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// markSession records the offsets a claim marked for commit.
type markSession struct {
	mu     sync.Mutex
	marked []int64
}

func (s *markSession) mark(offset int64) {
	s.mu.Lock()
	s.marked = append(s.marked, offset)
	s.mu.Unlock()
}

func (s *markSession) last() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.marked) == 0 {
		return -1
	}
	return s.marked[len(s.marked)-1]
}

// newTestPartition returns a claim of one partition with offsets 0..n-1
// delivered, under policy.
func newTestPartition(policy FailurePolicy, n int) (*Claim, *markSession) {
	sess := &markSession{}
	p := New(Config{Topic: "t", Policy: policy, OnAdvance: sess.mark})
	for i := range n {
		p.cp.Track(uint64(i))
	}
	return p, sess
}

func outcomes(ids ...uint64) []acker.Outcome {
	os := make([]acker.Outcome, len(ids))
	for i, id := range ids {
		os[i] = acker.Outcome{ID: id}
	}
	return os
}

// interruptedOutcome is what the core reports for a message whose handler
// returned ctx.Err() because the pipeline's shutdown cancelled it.
func interruptedOutcome(id uint64, d acker.Disposition) acker.Outcome {
	return acker.Outcome{ID: id, Err: fmt.Errorf("%w: %w", acker.ErrShutdown, context.Canceled), Disposition: d}
}

// Guarantee: a failure the pipeline's shutdown caused is never committed
// past, under either failure policy and whatever its disposition (even
// Discard), not even once the records after it are handled; the claim does
// not rewind for it, and it no longer waits for the records after it.
func TestInterruptedOutcomeHoldsCommit(t *testing.T) {
	for _, policy := range []FailurePolicy{FailureCommit, FailureRedeliver} {
		for _, d := range []acker.Disposition{acker.DispositionRetry, acker.DispositionDefault, acker.DispositionDiscard} {
			t.Run(fmt.Sprintf("%s/%s", policy, d), func(t *testing.T) {
				p, sess := newTestPartition(policy, 10)
				p.Ack(context.Background(), outcomes(0, 1, 2), nil)
				if got := sess.last(); got != 3 {
					t.Fatalf("marked %d after 0..2 handled, want 3", got)
				}
				p.Ack(context.Background(), outcomes(4, 5), []acker.Outcome{interruptedOutcome(3, d)})
				p.Ack(context.Background(), outcomes(6, 7, 8, 9), nil)
				if got := sess.last(); got != 3 {
					t.Fatalf("marked %d after offset 3 was interrupted by the shutdown, want 3", got)
				}
				if got := p.committable(); got != 3 {
					t.Fatalf("committable %d, want 3", got)
				}
				select {
				case <-p.RetryCh:
					t.Fatal("the claim was asked to rewind for an interrupted record while stopping")
				default:
				}
				if n := p.cp.Pending(); n != 0 {
					t.Fatalf("the claim still waits for %d records after the interrupted one", n)
				}
			})
		}
	}
}

// Guarantee: an ordinary failure under FailureCommit is still committed
// past (the hold is only for shutdown interruptions).
func TestOrdinaryFailureCommitsPast(t *testing.T) {
	p, sess := newTestPartition(FailureCommit, 4)
	p.Ack(context.Background(), outcomes(0, 2, 3), []acker.Outcome{{ID: 1, Err: context.Canceled}})
	if got := sess.last(); got != 4 {
		t.Fatalf("marked %d, want 4", got)
	}
}

// Guarantee: CommittedPast counts each failed message with
// DispositionDefault that FailureCommit commits past once, and neither
// a discarded one, a retried one, one acknowledged twice, nor one whose
// offset a rewind dropped (it is fetched again).
func TestCommittedPastCountsOnlyFailuresGivenUp(t *testing.T) {
	p, _ := newTestPartition(FailureCommit, 10)
	failed := func(id uint64, d acker.Disposition) acker.Outcome {
		return acker.Outcome{ID: id, Err: errors.New("fails"), Disposition: d}
	}
	p.Ack(t.Context(), nil, []acker.Outcome{failed(0, acker.DispositionDefault), failed(1, acker.DispositionDiscard)})
	p.Ack(t.Context(), nil, []acker.Outcome{failed(0, acker.DispositionDefault)}) // again
	p.Ack(t.Context(), nil, []acker.Outcome{failed(4, acker.DispositionRetry)})
	if at := p.TakeRetry(); at != 4 {
		t.Fatalf("TakeRetry = %d, want 4", at)
	}
	p.Ack(t.Context(), nil, []acker.Outcome{failed(6, acker.DispositionDefault), failed(2, acker.DispositionDefault)})
	if got := p.CommittedPast.Load(); got != 2 {
		t.Errorf("CommittedPast = %d, want 2 (offsets 0 and 2)", got)
	}
	if got := p.Stats().FailedCommitted; got != 2 {
		t.Errorf("Stats().FailedCommitted = %d, want 2", got)
	}
}

// Guarantee: a failure acknowledged in the same call as an interrupted
// outcome at a lower offset is not counted as committed past: the commit
// stays held below the interrupted offset, so the failed record is
// delivered again.
func TestCommittedPastLeavesOutFailuresAboveAnInterruption(t *testing.T) {
	for _, order := range []string{"interrupted first", "failure first"} {
		t.Run(order, func(t *testing.T) {
			p, _ := newTestPartition(FailureCommit, 10)
			interrupted := acker.Outcome{ID: 2, Err: acker.WrapShutdown(context.Canceled), Disposition: acker.DispositionRetry}
			fail := acker.Outcome{ID: 5, Err: errors.New("fails"), Disposition: acker.DispositionDefault}
			below := acker.Outcome{ID: 1, Err: errors.New("fails"), Disposition: acker.DispositionDefault}
			outcomes := []acker.Outcome{interrupted, fail, below}
			if order == "failure first" {
				outcomes = []acker.Outcome{fail, below, interrupted}
			}
			p.Ack(t.Context(), []acker.Outcome{{ID: 0}}, outcomes)
			if got := p.CommittedPast.Load(); got != 1 {
				t.Fatalf("CommittedPast = %d, want 1 (offset 1; offset 5 is above the interruption at 2)", got)
			}
		})
	}
}

// Guarantee: a failure settled while a lower offset is still pending is
// counted as committed past only once the offset marked for commit passes
// it, and not at all when an interruption acknowledged later holds the
// commit below it (it is delivered again).
func TestCommittedPastWaitsForTheCommitToPassTheFailure(t *testing.T) {
	fail := func(id uint64) acker.Outcome {
		return acker.Outcome{ID: id, Err: errors.New("fails"), Disposition: acker.DispositionDefault}
	}
	t.Run("passed", func(t *testing.T) {
		p, _ := newTestPartition(FailureCommit, 10)
		p.Ack(t.Context(), nil, []acker.Outcome{fail(3)})
		if got := p.CommittedPast.Load(); got != 0 {
			t.Fatalf("CommittedPast = %d while offsets 0-2 are pending, want 0", got)
		}
		p.Ack(t.Context(), []acker.Outcome{{ID: 0}, {ID: 1}, {ID: 2}}, nil)
		if got := p.CommittedPast.Load(); got != 1 {
			t.Fatalf("CommittedPast = %d once the commit passed offset 3, want 1", got)
		}
	})
	t.Run("held below by a later interruption", func(t *testing.T) {
		p, _ := newTestPartition(FailureCommit, 10)
		p.Ack(t.Context(), nil, []acker.Outcome{fail(10 - 1)})
		p.Ack(t.Context(), nil, []acker.Outcome{{ID: 5, Err: acker.WrapShutdown(context.Canceled), Disposition: acker.DispositionRetry}})
		p.Ack(t.Context(), []acker.Outcome{{ID: 0}, {ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}}, nil)
		if got := p.CommittedPast.Load(); got != 0 {
			t.Fatalf("CommittedPast = %d, want 0: the commit is held at 5, below the failure at 9", got)
		}
		if got := p.Committable(); got != 5 {
			t.Fatalf("Committable = %d, want 5", got)
		}
	})
}
