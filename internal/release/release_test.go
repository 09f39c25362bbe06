package release_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/release"
)

// Guarantee: a storm of releases wakes each listener once until it runs
// (one value waits in its channel, whatever the number of Begin calls), a
// release stays active until the last of them ends, and end is
// idempotent.
func TestReleaseStormWakesEachListenerOnce(t *testing.T) {
	var s release.Signal
	a, b := s.Listen(), s.Listen()
	ends := make([]func(), 1000)
	for i := range ends {
		ends[i] = s.Begin()
	}
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("listeners hold %d and %d wake-ups after %d releases, want 1 each", len(a), len(b), len(ends))
	}
	for _, end := range ends[1:] {
		end()
		end()
	}
	if !s.Active() {
		t.Fatal("inactive while one release is still in progress")
	}
	ends[0]()
	if s.Active() {
		t.Fatal("active once every release ended")
	}
}

// Guarantee: a nil Signal is one nobody listens to: Begin returns a no-op,
// Active is false and Listen's channel never receives.
func TestNilReleaseSignalDoesNothing(t *testing.T) {
	var s *release.Signal
	s.Begin()()
	if s.Active() || s.Listen() != nil {
		t.Fatal("a nil Signal is active or listens")
	}
}
