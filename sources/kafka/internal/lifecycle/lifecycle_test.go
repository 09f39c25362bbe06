package lifecycle_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/lifecycle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// member records what the lifecycle did to it.
type member struct {
	stage    string
	failed   chan error
	closeErr error
	drained  atomic.Int32
	closed   atomic.Int32
	counts   claim.MemberStats // the counters Stats reports
	// stall, when set, makes the next Stats call close entered and wait
	// for release.
	stall            atomic.Bool
	entered, release chan struct{}
	// hold, when set, makes Close wait until it is closed.
	hold chan struct{}
}

func newMember(stage string) *member { return &member{stage: stage, failed: make(chan error, 1)} }

func (m *member) Drain()               { m.drained.Add(1) }
func (m *member) Failed() <-chan error { return m.failed }
func (m *member) Close(context.Context) error {
	if m.hold != nil {
		<-m.hold
	}
	m.closed.Add(1)
	return m.closeErr
}
func (m *member) Stats() claim.MemberStats {
	if m.stall.CompareAndSwap(true, false) {
		close(m.entered)
		<-m.release
	}
	st := m.counts
	st.Stage = m.stage
	return st
}

func stages(st claim.Stats) []string {
	var out []string
	for _, m := range st.Members {
		out = append(out, m.Stage)
	}
	return out
}

func started(s *lifecycle.Members[*member], m *member) func() (*member, error) {
	return func() (*member, error) {
		if !s.Add(m) {
			return nil, claim.ErrClosed
		}
		return m, nil
	}
}

// Guarantee: when Run's context ends, the member drains and stays live
// (it is still in Stats and is closed by Close), so that what it delivered
// can still be committed.
func TestRunDrainsAndKeepsMemberUntilClose(t *testing.T) {
	var s lifecycle.Members[*member]
	m := newMember("p1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx, started(&s, m)); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if m.drained.Load() != 1 || m.closed.Load() != 0 {
		t.Fatalf("drained %d, closed %d times; want 1, 0", m.drained.Load(), m.closed.Load())
	}
	if got := stages(s.Stats("g")); !slices.Equal(got, []string{"p1"}) {
		t.Fatalf("live members %v, want [p1]", got)
	}
	if err := s.Close(context.Background()); err != nil || m.closed.Load() != 1 {
		t.Fatalf("Close = %v, member closed %d times; want nil, 1", err, m.closed.Load())
	}
}

// Guarantee: when the member fails, Run closes it, forgets it and returns
// its error.
func TestRunReturnsFailureAndForgetsMember(t *testing.T) {
	var s lifecycle.Members[*member]
	m := newMember("p1")
	boom := errors.New("group keeps failing")
	m.failed <- boom
	if err := s.Run(context.Background(), started(&s, m)); !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want %v", err, boom)
	}
	if m.closed.Load() != 1 || m.drained.Load() != 0 {
		t.Fatalf("closed %d, drained %d times; want 1, 0", m.closed.Load(), m.drained.Load())
	}
	if st := s.Stats("g"); st.GroupID != "g" || len(st.Members) != 0 {
		t.Fatalf("Stats = %+v, want group g and no member", st)
	}
	if err := s.Close(context.Background()); err != nil || m.closed.Load() != 1 {
		t.Fatalf("Close = %v, member closed %d times; want nil, once in all", err, m.closed.Load())
	}
}

// Guarantee: Run returns start's error as it is, and nil without waiting
// when start returns no member (its context ended first).
func TestRunWithoutMember(t *testing.T) {
	var s lifecycle.Members[*member]
	boom := errors.New("cannot connect")
	if err := s.Run(context.Background(), func() (*member, error) { return nil, boom }); err != boom {
		t.Fatalf("Run = %v, want %v", err, boom)
	}
	if err := s.Run(context.Background(), func() (*member, error) { return nil, nil }); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}

// Guarantee: Close closes every live member, returns their errors joined,
// and from then on the source is closed: no member is added and no
// connection check starts.
func TestCloseReleasesAllAndRefusesNewMembers(t *testing.T) {
	var s lifecycle.Members[*member]
	a, b := newMember("a"), newMember("b")
	b.closeErr = errors.New("close client b")
	if !s.Add(a) || !s.Add(b) || s.Closed() {
		t.Fatal("members refused by an open source")
	}
	if got := stages(s.Stats("g")); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("live members %v, want [a b] in stage order", got)
	}
	if err := s.Close(context.Background()); !errors.Is(err, b.closeErr) {
		t.Fatalf("Close = %v, want b's error", err)
	}
	if a.closed.Load() != 1 || b.closed.Load() != 1 || !s.Closed() {
		t.Fatalf("closed a %d, b %d times, source closed %v; want 1, 1, true", a.closed.Load(), b.closed.Load(), s.Closed())
	}
	if s.Add(newMember("c")) {
		t.Fatal("a closed source added a member")
	}
	probed := false
	err := s.CheckBrokers(context.Background(), []string{"b:9092"}, 0, slog.Default(), func(error) bool { return false }, func(context.Context, string) error { probed = true; return nil })
	if !errors.Is(err, claim.ErrClosed) || probed {
		t.Fatalf("CheckBrokers after Close = %v, probed %v; want ErrClosed, no probe", err, probed)
	}
}

// Guarantee: Close waits for the connection checks still running (a probe
// still closing its connection after its check returned), and the source
// is closed from the moment Close begins: a check asked for meanwhile
// starts no probe and returns ErrClosed.
func TestCloseWaitsForRunningChecksAndRefusesNewOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s lifecycle.Members[*member]
		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		defer unblock() // a failing check ends with no probe left waiting
		probe := func(_ context.Context, addr string) error {
			if addr == "slow:9092" {
				<-release
			}
			return nil
		}
		err := s.CheckBrokers(context.Background(), []string{"fast:9092", "slow:9092"}, time.Minute, slog.Default(), func(error) bool { return false }, probe)
		if err != nil {
			t.Fatalf("CheckBrokers = %v, want nil once one broker answers", err)
		}
		closed := make(chan error, 1)
		go func() { closed <- s.Close(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-closed:
			t.Fatalf("Close = %v with a probe still running, want it to wait", err)
		default:
		}
		probed := false
		err = s.CheckBrokers(context.Background(), []string{"b:9092"}, time.Minute, slog.Default(), func(error) bool { return false },
			func(context.Context, string) error { probed = true; return nil })
		if !errors.Is(err, claim.ErrClosed) || probed {
			t.Fatalf("CheckBrokers while Close waits = %v, probed %v; want ErrClosed, no probe", err, probed)
		}
		unblock()
		if err := <-closed; err != nil {
			t.Fatalf("Close = %v, want nil", err)
		}
	})
}

// Guarantee: Close whose context has ended ends the connection checks'
// probes still running (their context ends) and returns once they have
// returned, rather than leaving them running for up to their timeout.
func TestCloseWithAnEndedContextEndsTheRunningProbesAndWaitsForThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s lifecycle.Members[*member]
		var returned atomic.Bool
		probe := func(ctx context.Context, addr string) error {
			if addr == "hung:9092" {
				<-ctx.Done()
				returned.Store(true)
				return ctx.Err()
			}
			return nil
		}
		err := s.CheckBrokers(context.Background(), []string{"fast:9092", "hung:9092"}, time.Minute, slog.Default(), func(error) bool { return false }, probe)
		if err != nil {
			t.Fatalf("CheckBrokers = %v, want nil once one broker answers", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Close(ctx); err != nil {
			t.Fatalf("Close = %v, want nil", err)
		}
		if !returned.Load() {
			t.Fatal("Close returned with a probe still running")
		}
	})
}

// Guarantee: a stage's Rebalances, Commits and CommitErrors are totals for
// the source's life: when a member fails and the stage's Run starts a new
// one, the new member's counts add to those of the member gone (and its
// LastCommitError is the gone member's while it has none of its own), so
// the exported *_total counters never go down. Readings taken while the
// stage restarts its members over and over never go down either.
func TestAStageCountsDoNotGoDownWhenItsMemberIsReplaced(t *testing.T) {
	var s lifecycle.Members[*member]
	lastErr := &claim.CommitError{Err: errors.New("refused")}
	first := newMember("p1")
	first.counts = claim.MemberStats{Rebalances: 2, Commits: 5, CommitErrors: 1, LastCommitError: lastErr}
	first.failed <- errors.New("session lost")
	_ = s.Run(context.Background(), started(&s, first))
	second := newMember("p1")
	second.counts = claim.MemberStats{Rebalances: 1, Commits: 3}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.Run(ctx, started(&s, second))
	st := s.Stats("g")
	if len(st.Members) != 1 {
		t.Fatalf("Stats = %+v, want the one live member", st)
	}
	m := st.Members[0]
	if m.Rebalances != 3 || m.Commits != 8 || m.CommitErrors != 1 || m.LastCommitError != lastErr {
		t.Fatalf("after a member was replaced: Rebalances %d, Commits %d, CommitErrors %d, LastCommitError %v; want 3, 8, 1, %v",
			m.Rebalances, m.Commits, m.CommitErrors, m.LastCommitError, lastErr)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	var r lifecycle.Members[*member]
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for range 200 {
			m := newMember("p1")
			m.counts = claim.MemberStats{Rebalances: 1, Commits: 1, CommitErrors: 1}
			m.failed <- errors.New("session lost")
			_ = r.Run(context.Background(), started(&r, m))
		}
	})
	var last claim.MemberStats
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
		}
		for _, m := range r.Stats("g").Members {
			if m.Commits < last.Commits || m.Rebalances < last.Rebalances || m.CommitErrors < last.CommitErrors {
				t.Fatalf("a reading went down: %+v after %+v", m, last)
			}
			last = m
		}
	}
	wg.Wait()
}

// Guarantee: a reading that has listed a member as live when the member
// fails and is forgotten counts the member's counts once: with the member
// it listed, not again with the counts of the members gone.
func TestAReadingCountsAMemberForgottenMeanwhileOnce(t *testing.T) {
	var s lifecycle.Members[*member]
	m := newMember("p1")
	m.counts = claim.MemberStats{Rebalances: 2, Commits: 5, CommitErrors: 1}
	m.entered, m.release = make(chan struct{}), make(chan struct{})
	ran := make(chan error, 1)
	go func() { ran <- s.Run(context.Background(), started(&s, m)) }()
	wait.For(t, "the member live", func() bool { return len(s.Stats("g").Members) == 1 })
	m.stall.Store(true)
	read := make(chan claim.Stats, 1)
	go func() { read <- s.Stats("g") }()
	<-m.entered // the reading listed m as live and reads its counts
	m.failed <- errors.New("session lost")
	<-ran // m is forgotten, its counts kept for p1
	close(m.release)
	st := <-read
	if len(st.Members) != 1 || st.Members[0].Commits != 5 || st.Members[0].Rebalances != 2 || st.Members[0].CommitErrors != 1 {
		t.Fatalf("the reading = %+v, want the member's counts once (Rebalances 2, Commits 5, CommitErrors 1)", st.Members)
	}
}

// Guarantee: every Close called together waits for the members' close,
// which one of them began: none returns while a member's Close has not
// returned, and each returns nil once it has, the member closed once.
func TestClosesCalledTogetherAllWaitForTheMembersClose(t *testing.T) {
	const rounds, closers = 2000, 4
	for round := range rounds {
		synctest.Test(t, func(t *testing.T) {
			var s lifecycle.Members[*member]
			m := newMember("a")
			m.hold = make(chan struct{})
			if !s.Add(m) {
				t.Fatal("a member refused by an open source")
			}
			errs := wait.Together(closers, func() error { return s.Close(context.Background()) })
			synctest.Wait()
			select {
			case err := <-errs:
				close(m.hold)
				t.Fatalf("round %d: a Close called with others returned (%v) while the member's Close had not", round, err)
			default:
			}
			close(m.hold)
			for range closers {
				if err := <-errs; err != nil {
					t.Fatalf("round %d: Close = %v, want nil", round, err)
				}
			}
			if n := m.closed.Load(); n != 1 {
				t.Fatalf("round %d: the member was closed %d times, want once", round, n)
			}
		})
	}
}

// Guarantee: a source keeps track of the Close calls still closing only:
// Close called again and again (a retry loop) leaves nothing behind.
func TestRepeatedClosesLeaveNothingBehind(t *testing.T) {
	const closes = 1000
	var s lifecycle.Members[*member]
	if !s.Add(newMember("a")) {
		t.Fatal("a member refused by an open source")
	}
	for range closes {
		if err := s.Close(context.Background()); err != nil {
			t.Fatalf("Close = %v, want nil", err)
		}
	}
	if n := lifecycle.CloseWaiters(&s); n != 0 {
		t.Errorf("after %d Close calls returned, %d are still tracked, want 0", closes, n)
	}
}
