package claim

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/telemetry"
)

// Guarantee: a claim's final commit returns once its timeout has passed,
// the wait for a commit already on its way included, when the cluster
// answers neither; it records nothing as committed, and the commit on its
// way, answered later, is recorded.
func TestCommitFinalReturnsByItsTimeoutWithoutAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, c := handledTo(10)
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
		err := m.CommitFinal(context.Background(), timeout, c, 3, 100*time.Millisecond, send, func(error) bool { return false }, nil)
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

// Guarantee: a commit that gives up waiting for the one before it counts
// and logs a failure, naming the partitions, only when it had offsets to
// send: with nothing new handled, not sending is no failure.
func TestCommitNotSentFailsOnlyWithOffsetsToSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, c := handledTo(10)
		answer := make(chan struct{})
		send := func(context.Context, []Block) ([]Block, error) {
			<-answer
			return nil, nil
		}
		first := make(chan error, 1)
		go func() { first <- m.Commit(context.Background(), nil, send) }()
		synctest.Wait()       // the first commit is on its way, unanswered
		c.Committed.Store(10) // as if it had been answered: nothing new

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := m.Commit(ctx, c, send); err != nil {
			t.Errorf("a commit with nothing to send, not sent = %v, want nil", err)
		}
		if n := m.commitErrors.Load(); n != 0 {
			t.Errorf("%d commit failures counted with nothing to send, want 0", n)
		}
		c.Marked.Store(20)
		var ce *CommitError
		if err := m.Commit(ctx, nil, send); !errors.As(err, &ce) || len(ce.Partitions) != 1 || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a commit of offset 20, not sent = %v, want a *CommitError naming its partition and wrapping context.DeadlineExceeded", err)
		}
		close(answer)
		<-first
	})
}

// handledTo returns a member with one claim whose messages are handled up
// to offset off, none of them committed.
func handledTo(off int64) (*Member, *Claim) {
	m := NewMember("g", "s", slog.New(slog.DiscardHandler), false)
	c, _ := newTestPartition(FailureCommit, 0)
	m.Add(c)
	c.Marked.Store(off)
	return m, c
}

// Guarantee: a PartitionAssigned or PartitionRevoked hook that panics costs
// one error log line naming the hook and the partition; the claim and its
// release go on.
func TestPanickingPartitionHooksAreLoggedOnce(t *testing.T) {
	m, c := handledTo(10)
	var logged bytes.Buffer
	m.Log = slog.New(slog.NewTextHandler(&logged, nil))
	h := &telemetry.Hooks{
		PartitionAssigned: func(context.Context, telemetry.Assignment) { panic("assigned") },
		PartitionRevoked:  func(context.Context, telemetry.Assignment) { panic("revoked") },
	}
	m.Assigned(context.Background(), h, c)
	m.Revoked(context.Background(), h, c)
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 log lines, got %q", logged.String())
	}
	for i, hook := range []string{"PartitionAssigned", "PartitionRevoked"} {
		for _, want := range []string{"level=ERROR", "hook=" + hook, "topic=" + c.Topic, "partition=0"} {
			if !strings.Contains(lines[i], want) {
				t.Errorf("log line %q lacks %q", lines[i], want)
			}
		}
	}
}

// Guarantee: a PartitionAssigned or PartitionRevoked hook that ends its
// goroutine (runtime.Goexit, as t.FailNow does) ends only its own call:
// Assigned and Revoked return to their caller (a client's goroutine), and
// each exit costs one error log line naming the hook and the partition,
// with the stack of the exit.
func TestExitingPartitionHooksReturnToTheCallerAndAreLoggedOnce(t *testing.T) {
	m, c := handledTo(10)
	var logged bytes.Buffer
	m.Log = slog.New(slog.NewTextHandler(&logged, nil))
	h := &telemetry.Hooks{
		PartitionAssigned: func(context.Context, telemetry.Assignment) { runtime.Goexit() },
		PartitionRevoked:  func(context.Context, telemetry.Assignment) { runtime.Goexit() },
	}
	returned := make(chan bool, 1)
	go func() {
		ok := false
		defer func() { returned <- ok }()
		m.Assigned(context.Background(), h, c)
		m.Revoked(context.Background(), h, c)
		ok = true
	}()
	if !<-returned {
		t.Fatal("the hook's exit ended its caller's goroutine: Assigned or Revoked never returned")
	}
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 log lines, got %q", logged.String())
	}
	for i, hook := range []string{"PartitionAssigned", "PartitionRevoked"} {
		for _, want := range []string{"level=ERROR", "runtime.Goexit", "hook=" + hook, "topic=" + c.Topic, "partition=0"} {
			if !strings.Contains(lines[i], want) {
				t.Errorf("log line %q lacks %q", lines[i], want)
			}
		}
	}
}

// Guarantee: commits the broker refuses because the group rebalances log
// one INFO line, the first after an accepted commit, then DEBUG lines, and
// one WARN line once the refusals have lasted the rebalance timeout; an
// accepted commit starts over. A released claim's final commit refused for
// the same reason, and any other refusal, is a WARN line, those within 10s
// of the last such line held back (counted in the next one), unless the
// final commit goes out again in the next generation: its refusal is
// logged as the others a rebalance makes, never at WARN, and at WARN once
// only when it is given up after all. Every refusal is counted for Stats.
func TestCommitsRefusedByARebalanceLogOnceAtInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, c := handledTo(10)
		var logged bytes.Buffer
		m.Log = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
		rebalancing := errors.New("rebalancing")
		other := errors.New("other")
		m.Rebalancing = func(err error) bool { return errors.Is(err, rebalancing) }
		m.RebalanceTimeout = 10 * time.Second
		answer := func(err error) Send {
			return func(_ context.Context, blocks []Block) ([]Block, error) {
				for i := range blocks {
					blocks[i].Err = err
				}
				return blocks, nil
			}
		}
		levels := func() []string {
			var out []string
			for line := range strings.Lines(logged.String()) {
				for _, f := range strings.Fields(line) {
					if lvl, ok := strings.CutPrefix(f, "level="); ok {
						out = append(out, lvl)
					}
				}
			}
			logged.Reset()
			return out
		}
		sentAgain := func(err error) bool { return errors.Is(err, rebalancing) }
		const (
			commit = iota
			final  // a final commit not sent again
			again  // a final commit sent again when the group refused it as it rebalanced
			gaveUp // the same, given up after it was refused
		)
		steps := []struct {
			wait time.Duration
			kind int
			err  error
			want string // the levels logged, "" for none
		}{
			{0, commit, rebalancing, "INFO"},
			{time.Second, commit, rebalancing, "DEBUG"},
			{9 * time.Second, commit, rebalancing, "WARN"}, // refused for 10s
			{time.Second, commit, rebalancing, "DEBUG"},
			{0, commit, nil, ""}, // accepted: starts over
			{0, commit, rebalancing, "INFO"},
			{0, final, rebalancing, "WARN"},
			{0, commit, other, ""}, // within 10s of the WARN above: held back
			{10 * time.Second, commit, other, "WARN"},
			{0, commit, rebalancing, "WARN"}, // refused since step 5, 10s ago
			{0, commit, rebalancing, "DEBUG"},
			{0, commit, nil, ""},
			{0, again, rebalancing, "INFO"},
			{time.Second, again, rebalancing, "DEBUG"},
			{10 * time.Second, again, rebalancing, "DEBUG"}, // no WARN however long
			{0, gaveUp, rebalancing, "DEBUG WARN"},
			{0, again, other, ""}, // not sent again; within 10s of the WARN above: held back
		}
		errs := int64(0)
		for i, s := range steps {
			time.Sleep(s.wait)
			c.Committed.Store(-1) // something to commit
			var err error
			switch s.kind {
			case commit:
				err = m.Commit(context.Background(), nil, answer(s.err))
			case final:
				err = m.CommitFinal(context.Background(), time.Second, c, 1, 0, answer(s.err), func(error) bool { return true }, nil)
			default:
				err = m.CommitFinal(context.Background(), time.Second, c, 1, 0, answer(s.err), func(error) bool { return true }, sentAgain)
				if s.kind == gaveUp {
					m.GaveUp(err)
				}
			}
			if s.err != nil {
				errs++
			}
			if gotAgain, wantAgain := errors.Is(err, ErrSentAgain), s.kind >= again && errors.Is(s.err, rebalancing); gotAgain != wantAgain {
				t.Errorf("step %d: error %v, want one wrapping ErrSentAgain: %v", i, err, wantAgain)
			}
			if got, want := levels(), strings.Fields(s.want); !slices.Equal(got, want) {
				t.Errorf("step %d (%v after %v): logged %v, want %v", i, s.err, s.wait, got, want)
			}
		}
		if got := m.Stats().CommitErrors; got != errs {
			t.Errorf("%d commit errors counted, want %d", got, errs)
		}
	})
}

// Guarantee: the final commits of claims released together go out in one
// request, the first claim's offset first: the later claims find their
// offsets committed and send nothing, so releasing n partitions costs one
// round trip, not n one after the other.
func TestFinalCommitsOfClaimsReleasedTogetherShareOneRequest(t *testing.T) {
	const parts = 100
	m := NewMember("g", "s", slog.New(slog.DiscardHandler), false)
	cs := make([]*Claim, parts)
	for i := range cs {
		cs[i] = New(Config{Topic: "t", Partition: int32(i), Committed: -1, Start: 0})
		m.Add(cs[i])
		cs[i].Marked.Store(int64(10 + i))
	}
	var requests [][]Block
	send := func(_ context.Context, blocks []Block) ([]Block, error) {
		requests = append(requests, slices.Clone(blocks))
		return blocks, nil
	}
	never := func(error) bool { return false }
	for _, c := range cs {
		if err := m.CommitFinal(context.Background(), time.Minute, c, 3, 0, send, never, nil); err != nil {
			t.Fatalf("final commit of %s = %v", c.Key, err)
		}
	}
	if len(requests) != 1 {
		t.Fatalf("%d commit requests for %d claims released together, want 1", len(requests), parts)
	}
	if got := requests[0]; len(got) != parts || got[0].C != cs[0] {
		t.Errorf("the request carried %d offsets (first %s), want all %d, %s's first", len(got), got[0].C.Key, parts, cs[0].Key)
	}
	for _, c := range cs {
		if got, want := c.Committed.Load(), int64(10+c.Part); got != want {
			t.Errorf("%s committed at %d, want %d", c.Key, got, want)
		}
	}
}
