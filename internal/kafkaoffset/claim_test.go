package kafkaoffset_test

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// rcrowley/go-metrics (sarama's metric registry) starts one
		// process-wide meter ticker on first use and never stops it.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}

// session records what a claim marks and how often it commits.
type session struct {
	marks   []int64
	commits int
}

func (s *session) MarkOffset(topic string, part int32, off int64, meta string) {
	if topic != "t" || part != 3 || meta != "" {
		panic("marked on another partition, or with metadata")
	}
	s.marks = append(s.marks, off)
}

func (s *session) Commit() { s.commits++ }

// newClaim returns a claim of partition 3 of topic "t" that fetched offs.
func newClaim(offs ...int64) (*kafkaoffset.Claim, *session) {
	s := &session{}
	c := kafkaoffset.New(s, "t", 3)
	for _, o := range offs {
		c.Fetch(o)
	}
	return c, s
}

// settleEach settles offs in turn and returns what the claim marked.
func settleEach(c *kafkaoffset.Claim, s *session, offs ...int64) []int64 {
	before := len(s.marks)
	for _, o := range offs {
		c.Settle(o)
	}
	return slices.Clone(s.marks[before:])
}

func wantMarks(t *testing.T, what string, got []int64, want ...int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: marked %v, want %v", what, got, want)
	}
}

// Guarantee: settles in fetch order each mark the offset after the settled
// one: the end of the contiguous settled prefix.
func TestSettlesInOrderMarkEachPrefixEnd(t *testing.T) {
	c, s := newClaim(10, 11, 12)
	wantMarks(t, "settling 10, 11, 12", settleEach(c, s, 10, 11, 12), 11, 12, 13)
}

// Guarantee: an offset settled ahead of an earlier unsettled one marks
// nothing; settling the earlier one marks the end of the whole settled run
// at once.
func TestOutOfOrderSettlesWaitForTheGap(t *testing.T) {
	c, s := newClaim(10, 11, 12, 13, 14)
	wantMarks(t, "settling 14, 12, 13, 11", settleEach(c, s, 14, 12, 13, 11))
	wantMarks(t, "settling 10", settleEach(c, s, 10), 15)
}

// Guarantee: offsets need not be consecutive (compaction, transaction
// markers): only fetched offsets count, and the mark is one past the last
// settled one.
func TestGapsBetweenFetchedOffsetsDoNotHoldThePrefix(t *testing.T) {
	c, s := newClaim(3, 7, 8, 20)
	wantMarks(t, "settling 3", settleEach(c, s, 3), 4)
	wantMarks(t, "settling 8", settleEach(c, s, 8))
	wantMarks(t, "settling 7", settleEach(c, s, 7), 9)
	wantMarks(t, "settling 20", settleEach(c, s, 20), 21)
}

// Guarantee: a nacked message stays unsettled: the settles after it mark
// nothing until it is received again and acked; Return alone never moves
// the prefix.
func TestNackHoldsThePrefixBack(t *testing.T) {
	c, s := newClaim(0, 1, 2)
	for range 3 {
		c.Hand()
	}
	c.Return() // ack of 0
	wantMarks(t, "acking 0", settleEach(c, s, 0), 1)
	c.Return() // nack of 1: received again later
	c.Return() // ack of 2
	wantMarks(t, "nacking 1, acking 2", settleEach(c, s, 2))
	if c.Handed() != 0 {
		t.Fatalf("%d messages handed after three returns, want 0", c.Handed())
	}
	c.Hand() // 1 received again
	c.Return()
	wantMarks(t, "acking 1 received again", settleEach(c, s, 1), 3)
}

// Guarantee: a skipped record is settled at once: it marks when it ends the
// prefix, and otherwise waits for the records before it like any other.
func TestSkippedRecordsSettleAtOnce(t *testing.T) {
	c, s := newClaim()
	c.Skip(0)
	wantMarks(t, "skipping 0", s.marks, 1)
	c.Fetch(1)
	c.Skip(2)
	wantMarks(t, "fetching 1, skipping 2", s.marks, 1)
	wantMarks(t, "settling 1", settleEach(c, s, 1), 3)
}

// Guarantee: settles of offsets never fetched (above, between or below the
// fetched ones), repeated settles, settles below the marked prefix and
// negative offsets mark nothing; fetches that are negative or not above
// the last fetched offset are ignored.
func TestSettlesAndFetchesOutOfBoundsAreIgnored(t *testing.T) {
	c, s := newClaim(5, 7)
	wantMarks(t, "settling unknown offsets", settleEach(c, s, 4, 6, 8, 100, -1))
	wantMarks(t, "settling 5", settleEach(c, s, 5), 6)
	wantMarks(t, "settling 5 again and 4", settleEach(c, s, 5, 4))
	c.Fetch(7)  // already fetched
	c.Fetch(6)  // below the last fetched
	c.Fetch(-2) // negative
	wantMarks(t, "settling 6", settleEach(c, s, 6))
	wantMarks(t, "settling 7", settleEach(c, s, 7), 8)
	wantMarks(t, "settling 7 again", settleEach(c, s, 7))
	c.Fetch(8)
	wantMarks(t, "settling 8 fetched after the prefix emptied", settleEach(c, s, 8), 9)
}

// Guarantee: a long run of unsettled offsets is tracked in full: settling
// all but the first marks nothing, settling the first marks past the last.
func TestLongUnsettledRunIsKept(t *testing.T) {
	c, s := newClaim()
	const n = 5000
	for o := range int64(n) {
		c.Fetch(o)
	}
	for o := int64(n - 1); o > 0; o-- {
		c.Settle(o)
	}
	wantMarks(t, "settling all but 0", s.marks)
	wantMarks(t, "settling 0", settleEach(c, s, 0), n)
}

// Guarantee: after a rebalance, the released claim marks nothing more (its
// late settles cannot move the partition's commit), and the new claim of
// the same partition starts with nothing tracked: it marks only its own
// fetched offsets, even those the old claim had fetched.
func TestRevokedClaimMarksNothingAndNewClaimStartsAfresh(t *testing.T) {
	var mu sync.Mutex
	old, so := newClaim(0, 1, 2, 3)
	wantMarks(t, "old claim settling 0", settleEach(old, so, 0), 1)
	mu.Lock()
	old.Release(&mu, nil, time.Second)
	mu.Unlock()
	if !old.Revoked() {
		t.Fatal("a released claim is not revoked")
	}
	wantMarks(t, "old claim settling 1, 2, 3 after its release", settleEach(old, so, 1, 2, 3))

	renewed, sn := newClaim(1, 2)
	wantMarks(t, "new claim settling 0 and 3, which it never fetched", settleEach(renewed, sn, 0, 3))
	wantMarks(t, "new claim settling 2", settleEach(renewed, sn, 2))
	wantMarks(t, "new claim settling 1", settleEach(renewed, sn, 1), 3)
	if renewed.Revoked() {
		t.Fatal("a new claim is revoked")
	}
}

// locker is a mutex that counts its Unlock calls.
type locker struct {
	sync.Mutex
	unlocks int
}

func (l *locker) Unlock() {
	l.unlocks++
	l.Mutex.Unlock()
}

// Guarantee: Release with nothing handed out, or with the owner stopping,
// revokes at once without letting go of the owner's mutex.
func TestReleaseRevokesAtOnceWhenNothingToWaitFor(t *testing.T) {
	stopped := make(chan struct{})
	close(stopped)
	for _, tc := range []struct {
		name   string
		handed int
		stop   chan struct{}
	}{
		{"nothing handed", 0, nil},
		{"owner stopping", 2, stopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newClaim(0, 1)
			for range tc.handed {
				c.Hand()
			}
			var mu locker
			mu.Lock()
			c.Release(&mu, tc.stop, time.Hour)
			if mu.unlocks != 0 || !c.Revoked() {
				t.Fatalf("Release unlocked %d times, revoked %v; want 0 and true", mu.unlocks, c.Revoked())
			}
			mu.Unlock()
		})
	}
}

// releaseInBackground runs Release under mu in a goroutine and returns a
// channel that receives what Release returned once it has, with mu
// unlocked.
func releaseInBackground(c *kafkaoffset.Claim, mu *sync.Mutex, stop chan struct{}, timeout time.Duration) chan int {
	done := make(chan int, 1)
	go func() {
		mu.Lock()
		left := c.Release(mu, stop, timeout)
		mu.Unlock()
		done <- left
	}()
	return done
}

func returned(ch chan int) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Guarantee: Release waits for every handed-out message to be returned
// (settled or nacked), letting go of the owner's mutex meanwhile, and
// revokes the claim as soon as the last one is, well before its timeout.
func TestReleaseWaitsForHandedMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := newClaim(0, 1)
		c.Hand()
		c.Hand()
		var mu sync.Mutex
		start := time.Now()
		done := releaseInBackground(c, &mu, make(chan struct{}), time.Minute)
		synctest.Wait()
		if !mu.TryLock() {
			t.Fatal("Release holds the owner's mutex while it waits")
		}
		c.Return()
		c.Settle(0)
		mu.Unlock()
		synctest.Wait()
		if returned(done) {
			t.Fatal("Release returned with a message still handed out")
		}
		mu.Lock()
		c.Return()
		c.Settle(1)
		mu.Unlock()
		left := <-done
		if waited := time.Since(start); waited != 0 || !c.Revoked() || left != 0 {
			t.Fatalf("Release returned %d left after %s, revoked %v; want 0 at the last return, true", left, waited, c.Revoked())
		}
		wantMarks(t, "settles during the release", s.marks, 1, 2)
	})
}

// Guarantee: Release stops waiting after its timeout, reporting how many
// messages the subscriber still holds, and a message settled after that
// marks nothing.
func TestReleaseGivesUpAfterTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := newClaim(0)
		c.Hand()
		var mu sync.Mutex
		start := time.Now()
		left := <-releaseInBackground(c, &mu, make(chan struct{}), 3*time.Second)
		if waited := time.Since(start); waited != 3*time.Second || left != 1 {
			t.Fatalf("Release waited %s and left %d held, want the 3s timeout and 1", waited, left)
		}
		c.Return()
		c.Settle(0)
		if !c.Revoked() || len(s.marks) != 0 {
			t.Fatalf("revoked %v, marked %v after the timeout; want true, nothing", c.Revoked(), s.marks)
		}
	})
}

// Guarantee: the owner stopping (stop closed) ends Release's wait at once.
func TestReleaseStopsWaitingWhenTheOwnerStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClaim(0)
		c.Hand()
		var mu sync.Mutex
		stop := make(chan struct{})
		start := time.Now()
		done := releaseInBackground(c, &mu, stop, time.Hour)
		synctest.Wait()
		mu.Lock()
		close(stop)
		mu.Unlock()
		left := <-done
		if time.Since(start) != 0 || !c.Revoked() || c.Handed() != 1 || left != 0 {
			t.Fatalf("Release returned %d left after %s, revoked %v, %d handed; want 0 at once (a stop is no timeout), true, 1",
				left, time.Since(start), c.Revoked(), c.Handed())
		}
	})
}

// Guarantee: Marked is -1 until the claim marks an offset, then the offset
// it last marked: the end of the settled prefix, not moved by settles
// beyond a gap (the lag reported from it counts from there).
func TestMarkedIsTheSettledPrefixEndOrNoneYet(t *testing.T) {
	c, _ := newClaim(0, 1, 2)
	if m := c.Marked(); m != -1 {
		t.Fatalf("Marked of a claim that marked nothing = %d, want -1", m)
	}
	c.Settle(0)
	c.Settle(2)
	if m := c.Marked(); m != 1 {
		t.Fatalf("Marked after settling 0 and 2 of 0, 1, 2 = %d, want 1", m)
	}
	c.Settle(1)
	if m := c.Marked(); m != 3 {
		t.Fatalf("Marked after settling all of 0, 1, 2 = %d, want 3", m)
	}
}

// Guarantee: Commit sends what the session marked, once per call.
func TestCommitCommitsTheSession(t *testing.T) {
	c, s := newClaim(0)
	c.Settle(0)
	c.Commit()
	if s.commits != 1 || !slices.Equal(s.marks, []int64{1}) {
		t.Fatalf("%d commits of marks %v, want 1 of [1]", s.commits, s.marks)
	}
}
