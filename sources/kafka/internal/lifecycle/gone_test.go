package lifecycle_test

import (
	"context"
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/lifecycle"
)

// failedMember runs, on s, a member of stage whose counts are counts and
// which fails at once, so that Run forgets it.
func failedMember(s *lifecycle.Members[*member], stage string, counts claim.MemberStats) {
	m := newMember(stage)
	m.counts = counts
	m.failed <- errors.New("session lost")
	_ = s.Run(context.Background(), started(s, m))
}

// drainedMember runs, on s, a member of stage whose counts are counts and
// whose Run's context has ended, so that it drains and stays live.
func drainedMember(s *lifecycle.Members[*member], stage string, counts claim.MemberStats) *member {
	m := newMember(stage)
	m.counts = counts
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.Run(ctx, started(s, m))
	return m
}

// Guarantee: a stage's new member that has a commit error of its own
// reports it as its LastCommitError, not the error of the member gone.
func TestANewMembersOwnCommitErrorIsItsLastOne(t *testing.T) {
	var s lifecycle.Members[*member]
	defer s.Close(context.Background())
	old, own := &claim.CommitError{Err: errors.New("old")}, &claim.CommitError{Err: errors.New("own")}
	failedMember(&s, "p1", claim.MemberStats{CommitErrors: 1, LastCommitError: old})
	drainedMember(&s, "p1", claim.MemberStats{CommitErrors: 1, LastCommitError: own})
	st := s.Stats("g")
	if len(st.Members) != 1 || st.Members[0].LastCommitError != own || st.Members[0].CommitErrors != 2 {
		t.Fatalf("Stats = %+v, want the new member with its own LastCommitError (%v) and 2 CommitErrors", st.Members, own)
	}
}

// Guarantee: with two live members of a stage (one drained, one running),
// the counts of the stage's members gone add to the newest generation's,
// the one /metrics exports, and to it only.
func TestTheCountsOfAStagesMembersGoneGoToItsNewestGeneration(t *testing.T) {
	for _, newestFirst := range []bool{false, true} {
		var s lifecycle.Members[*member]
		failedMember(&s, "p1", claim.MemberStats{Commits: 5})
		gens := []int32{1, 2}
		if newestFirst {
			gens = []int32{2, 1}
		}
		for _, g := range gens {
			drainedMember(&s, "p1", claim.MemberStats{GenerationID: g, Commits: 1})
		}
		for _, m := range s.Stats("g").Members {
			want := int64(1)
			if m.GenerationID == 2 {
				want = 6
			}
			if m.Commits != want {
				t.Errorf("member of generation %d (newest started first: %t): Commits %d, want %d", m.GenerationID, newestFirst, m.Commits, want)
			}
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Guarantee: a reading taken while a stage's failed member is being
// forgotten counts that member's counts, in it or in the counts gone.
func TestAReadingWhileAMemberIsForgottenStillCountsIt(t *testing.T) {
	var s lifecycle.Members[*member]
	defer s.Close(context.Background())
	drainedMember(&s, "p1", claim.MemberStats{GenerationID: 1, Commits: 1})
	m := newMember("p1")
	m.counts = claim.MemberStats{GenerationID: 2, Commits: 5}
	m.entered, m.release = make(chan struct{}), make(chan struct{})
	ran := make(chan error, 1)
	go func() { ran <- s.Run(context.Background(), started(&s, m)) }()
	wait.For(t, "the two members live", func() bool { return len(s.Stats("g").Members) == 2 })
	m.stall.Store(true)
	m.failed <- errors.New("session lost")
	<-m.entered // Run forgets m and reads its counts
	st := s.Stats("g")
	close(m.release)
	<-ran
	var commits int64
	for _, mm := range st.Members {
		commits += mm.Commits
	}
	if commits != 6 {
		t.Fatalf("a reading while a member was forgotten = %+v, want 6 commits in all (5 of the member, 1 of the drained one)", st.Members)
	}
}
