package kafkatopology

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/redact"
)

// claimsOnly is a group session that tells only its claims.
type claimsOnly struct {
	sarama.ConsumerGroupSession
	claims map[string][]int32
}

func (s claimsOnly) Claims() map[string][]int32 { return s.claims }

// Guarantee: a releaser's group session that starts ends the stall of
// its hold topic (the sessions that failed) and those of the partitions
// the session does not claim (another member releases them now): Stats
// lists only the stalls of the partitions it still claims.
func TestASessionStartingEndsTheStallsOfTheHoldTopicAndOfPartitionsLeft(t *testing.T) {
	r := &releaser[msg]{topic: "hold", at: map[int32]*claimAt{}}
	r.stalls.init("hold", slog.New(slog.DiscardHandler), redact.Secrets{})
	r.stalls.fail(stallSession, -1, -1, errors.New("no session"))
	r.stalls.fail(stallRelease, 0, 5, errors.New("cannot produce"))
	r.stalls.fail(stallRelease, 1, 7, errors.New("cannot produce"))
	if n := len(r.stalls.appendTo(nil)); n != 3 {
		t.Fatalf("%d stalls before the session, want 3", n)
	}
	if err := r.Setup(claimsOnly{claims: map[string][]int32{"hold": {1}}}); err != nil {
		t.Fatal(err)
	}
	got := r.stalls.appendTo(nil)
	if len(got) != 1 || got[0].Partition != 1 || got[0].Offset != 7 {
		t.Fatalf("after a session claiming partition 1 started, stalls %+v, want only partition 1's at offset 7", got)
	}
}

// Guarantee: a stall first met where the releaser's position was not
// known takes the offset of a later failure that knows it: Stats reports
// it, and only a record from there on ends the stall.
func TestAStallTakesTheOffsetOfALaterFailureThatKnowsIt(t *testing.T) {
	var s stalls
	s.init("hold", slog.New(slog.DiscardHandler), redact.Secrets{})
	s.fail(stallFetch, 0, -1, errors.New("cannot decode"))
	s.fail(stallFetch, 0, 5, errors.New("cannot decode"))
	if got := s.appendTo(nil); len(got) != 1 || got[0].Offset != 5 || got[0].Failures != 2 {
		t.Fatalf("stalls %+v, want partition 0 at offset 5 after 2 failures", got)
	}
	s.fetched(0, 4)
	if got := s.appendTo(nil); len(got) != 1 {
		t.Fatalf("a record at offset 4, before the failure at 5, ended the stall: %+v", got)
	}
}
