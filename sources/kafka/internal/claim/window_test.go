package claim

import "testing"

// Guarantee: the claim's permits bound what its reader takes: Take never
// returns more than was granted and not yet taken, each permit is taken
// once, and a grant wakes the reader.
func TestTakeIsBoundedByTheGrantedPermits(t *testing.T) {
	c := New(Config{Topic: "t", Window: 4})
	c.Grant(3)
	select {
	case <-c.GrantCh:
	default:
		t.Fatal("a grant did not wake the claim's reader")
	}
	if got := c.Take(5); got != 3 {
		t.Fatalf("Take(5) = %d with 3 permits granted, want 3", got)
	}
	if got := c.Permits(); got != 0 {
		t.Fatalf("%d permits left after all were taken, want 0", got)
	}
	if got := c.Take(1); got != 0 {
		t.Fatalf("Take(1) = %d with no permit left, want 0", got)
	}
	c.Grant(2)
	if got := c.Take(1); got != 1 {
		t.Fatalf("Take(1) = %d with 2 permits granted, want 1", got)
	}
	if got := c.Permits(); got != 1 {
		t.Fatalf("%d permits left, want 1", got)
	}
}
