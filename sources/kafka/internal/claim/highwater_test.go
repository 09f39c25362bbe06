package claim

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// Guarantee: a claim's high-water mark counts the end offset the member
// listed last, even when lower than one it listed before: the log of a
// partition truncated (an unclean leader election), or of a topic
// deleted and created again, ends lower now, and its lag counts from
// that end, not from the old one for as long as the claim lasts.
func TestTheHighWaterMarkCountsTheEndListedLastEvenWhenLower(t *testing.T) {
	c := New(Config{Topic: "t", HighWater: func() int64 { return 0 }}) // nothing fetched
	c.NoteHighWater(500)
	if got := c.Stats().HighWater; got != 500 {
		t.Fatalf("HighWater after the end 500 was listed = %d, want 500", got)
	}
	c.NoteHighWater(40)
	if got := c.Stats(); got.HighWater != 40 || got.Lag != 40 {
		t.Fatalf("Stats after the end 500, then 40, was listed = HighWater %d, Lag %d; want 40 and 40", got.HighWater, got.Lag)
	}
}

// Guarantee: a member that claims nothing (more members than
// partitions, or between sessions) still has its listing called every
// interval, with no claims, so that the listing lets go of the
// connections it kept for the partitions it listed before instead of
// holding them for as long as the member claims nothing.
func TestAMemberThatClaimsNothingHasItsListingCalledWithNoClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMember("g", "s", slog.New(slog.DiscardHandler), false)
		ctx, cancel := context.WithCancel(t.Context())
		calls := make(chan int, 8)
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.HighWaterLoop(ctx, time.Second, func(_ context.Context, cs []*Claim) { calls <- len(cs) })
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		cancel()
		<-done
		select {
		case n := <-calls:
			if n != 0 {
				t.Fatalf("the listing of a member that claims nothing was called with %d claims", n)
			}
		default:
			t.Fatal("the listing of a member that claims nothing was not called within its interval")
		}
	})
}
