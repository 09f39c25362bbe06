package claim

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// Guarantee: a claim's final commit returns once its timeout has passed,
// the wait for a commit already on its way included, when the cluster
// answers neither; it records nothing as committed, and the commit on its
// way, answered later, is recorded.
func TestCommitFinalReturnsByItsTimeoutWithoutAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMember("g", "s", slog.New(slog.DiscardHandler), false)
		c, _ := newTestPartition(FailureCommit, 0)
		m.Add(c)
		c.Marked.Store(10)
		answer := make(chan struct{})
		// A cluster that answers once answer is closed; a request still
		// unanswered when its context ends is abandoned.
		send := func(ctx context.Context, blocks []Block) ([]Block, error) {
			select {
			case <-answer:
				return blocks, nil
			case <-ctx.Done():
				return blocks, context.Cause(ctx)
			}
		}
		periodic := make(chan error, 1)
		go func() { periodic <- m.Commit(context.Background(), nil, send) }()
		synctest.Wait() // the periodic commit is on its way, unanswered

		const timeout = 2 * time.Second
		start := time.Now()
		err := m.CommitFinal(context.Background(), timeout, c, 3, 100*time.Millisecond, send, func(error) bool { return false })
		if took := time.Since(start); took != timeout {
			t.Errorf("CommitFinal returned after %v, want its timeout %v", took, timeout)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("CommitFinal = %v, want an error wrapping context.DeadlineExceeded", err)
		}
		if got := c.Committed.Load(); got == 10 {
			t.Error("offset 10 recorded as committed without an answer")
		}
		close(answer)
		if err := <-periodic; err != nil {
			t.Fatalf("the periodic commit, answered, failed: %v", err)
		}
		if got := c.Committed.Load(); got != 10 {
			t.Errorf("committed %d after the answered commit, want 10", got)
		}
	})
}
