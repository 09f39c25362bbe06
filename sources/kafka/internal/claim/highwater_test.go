package claim

import "testing"

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
