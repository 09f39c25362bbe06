package claim

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// errRefused is a broker's refusal of one partition's offset.
var errRefused = errors.New("refused")

// refusingFirst returns a Send that counts its requests in sends and whose
// first request the broker answers with errRefused for its first offset;
// it accepts the others.
func refusingFirst(sends *int) Send {
	return func(_ context.Context, blocks []Block) ([]Block, error) {
		*sends++
		if *sends == 1 {
			blocks[0].Err = errRefused
		}
		return blocks, nil
	}
}

// Guarantee: a commit leaves out the offsets of a claim whose partition
// was lost (it may be another member's already) and sends the others'.
func TestALostClaimsOffsetsAreNotCommitted(t *testing.T) {
	m, lost := handledTo(10)
	kept := New(Config{Topic: "t", Partition: 1, Committed: -1, Start: 0})
	m.Add(kept)
	kept.Marked.Store(20)
	lost.Lost.Store(true)
	var sent []Block
	send := func(_ context.Context, blocks []Block) ([]Block, error) {
		sent = append(sent, blocks...)
		return blocks, nil
	}
	if err := m.Commit(t.Context(), nil, send); err != nil {
		t.Fatal(err)
	}
	if err := m.Commit(t.Context(), lost, send); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 1 || sent[0].C != kept {
		t.Fatalf("commits sent %d offsets, want only the kept claim's", len(sent))
	}
}

// Guarantee: an offset the broker refused is not recorded as committed,
// and goes out again with the next commit; the member counts the commit
// answered and the failure.
func TestARefusedOffsetGoesOutWithTheNextCommit(t *testing.T) {
	m, c := handledTo(10)
	before := c.Committed.Load()
	var sends int
	send := refusingFirst(&sends)
	if err := m.Commit(t.Context(), nil, send); !errors.Is(err, errRefused) {
		t.Fatalf("a refused commit = %v, want an error wrapping the refusal", err)
	}
	if got := c.Committed.Load(); got != before {
		t.Fatalf("Committed = %d after the broker refused offset 10, want %d", got, before)
	}
	if err := m.Commit(t.Context(), nil, send); err != nil {
		t.Fatal(err)
	}
	if sends != 2 || c.Committed.Load() != 10 {
		t.Fatalf("after %d requests Committed = %d, want offset 10 committed by the second", sends, c.Committed.Load())
	}
	if s := m.Stats(); s.Commits != 2 || s.CommitErrors != 1 {
		t.Fatalf("Stats counts %d commits and %d errors, want 2 and 1", s.Commits, s.CommitErrors)
	}
}

// Guarantee: a final commit whose own offset the broker refused (with an
// error that does not end the attempts) is sent again, up to its attempts.
func TestAFinalCommitRefusedIsSentAgain(t *testing.T) {
	m, c := handledTo(10)
	var sends int
	send := refusingFirst(&sends)
	never := func(error) bool { return false }
	if err := m.CommitFinal(t.Context(), time.Minute, c, 3, 0, send, never, nil); err != nil {
		t.Fatalf("final commit = %v, want nil once the second attempt was accepted", err)
	}
	if sends != 2 || c.Committed.Load() != 10 {
		t.Fatalf("after %d requests Committed = %d, want offset 10 committed by the second", sends, c.Committed.Load())
	}
}

// Guarantee: with CommitOnAck, an advance of a claim's handled prefix
// wakes the commit loop; without it, there is no wake-up channel.
func TestAnAdvanceWakesTheCommitLoopOnAck(t *testing.T) {
	m := NewMember("g", "s", slog.New(slog.DiscardHandler), true)
	m.Advanced(5)
	select {
	case <-m.Wake:
	default:
		t.Fatal("an advance did not wake the commit loop with CommitOnAck")
	}
	if NewMember("g", "s", slog.New(slog.DiscardHandler), false).Wake != nil {
		t.Fatal("a member committing on the interval has a wake-up channel")
	}
}

// Guarantee: Stats counts a generation once however many claims and
// sessions of it the member notes, and reports each claim's handled
// prefix and the records in flight.
func TestStatsCountGenerationsAndInFlight(t *testing.T) {
	m := NewMember("g", "s", slog.New(slog.DiscardHandler), false)
	m.NoteSession("m1", 1, nil)
	c, _ := newTestPartition(FailureCommit, 3)
	c.MemberID, c.Generation = "m1", 1
	m.Add(c)
	m.NoteSession("m1", 1, nil)
	m.NoteSession("m1", 2, nil)
	c.Ack(t.Context(), outcomes(0), nil)
	s := m.Stats()
	if s.Rebalances != 2 || s.GenerationID != 2 {
		t.Fatalf("Stats = %d rebalances, generation %d; want 2 and 2", s.Rebalances, s.GenerationID)
	}
	if ps := s.Partitions[0]; ps.Marked != 1 || ps.InFlight != 2 || ps.Committed != 0 {
		t.Fatalf("partition stats marked %d, in flight %d, committed %d; want 1, 2, 0", ps.Marked, ps.InFlight, ps.Committed)
	}
}
