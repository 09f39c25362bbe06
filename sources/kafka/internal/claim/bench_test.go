package claim

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
)

// BenchmarkAck measures a claim's acknowledgement path: 64 offsets tracked
// as one delivery, then acknowledged in chunks of 8, as processors do.
func BenchmarkAck(b *testing.B) {
	benchAck(b, nil)
}

// BenchmarkAckFailed measures BenchmarkAck's path with every message
// failed under FailureCommit: each chunk is committed past and counted
// (Claim.CommittedPast).
func BenchmarkAckFailed(b *testing.B) {
	p := benchAck(b, errors.New("failed"))
	if got, want := p.CommittedPast.Load(), int64(64*b.N); got != want {
		b.Fatalf("CommittedPast = %d, want %d", got, want)
	}
}

// benchAck tracks 64 offsets a loop, as one delivery, and acknowledges
// them in chunks of 8: successes when failure is nil, else failures with
// that error. It returns the claim.
func benchAck(b *testing.B, failure error) *Claim {
	// A claim whose advances go nowhere, as a member's with CommitInterval.
	p := New(Config{Topic: "t", Policy: FailureCommit, OnAdvance: func(int64) {}})
	chunk := make([]acker.Outcome, 8)
	next := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		p.mu.Lock()
		for i := range uint64(64) {
			p.cp.Track(next + i)
		}
		p.mu.Unlock()
		for c := uint64(0); c < 64; c += 8 {
			for i := range chunk {
				chunk[i] = acker.Outcome{ID: next + c + uint64(i), Err: failure}
			}
			if failure == nil {
				p.Ack(b.Context(), chunk, nil)
			} else {
				p.Ack(b.Context(), nil, chunk)
			}
		}
		next += 64
	}
	return p
}

// BenchmarkCommitTick measures one commit of a member claiming many
// partitions, one of which advanced since the last commit (the commit loop's
// tick under a light load): its cost grows with the partitions claimed,
// once per tick, never per message.
func BenchmarkCommitTick(b *testing.B) {
	for _, parts := range []int{64, 1000, 4000} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			m := NewMember("g", "s", discard, false)
			cs := make([]*Claim, parts)
			for i := range cs {
				cs[i] = New(Config{Topic: "t", Partition: int32(i), Committed: 0, Start: 0})
				m.Add(cs[i])
			}
			send := func(_ context.Context, blocks []Block) ([]Block, error) { return blocks, nil }
			off := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				off++
				cs[off%int64(parts)].Marked.Store(off)
				if err := m.Commit(context.Background(), nil, send); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMemberStats measures a member's Stats with many partitions
// claimed: what a /stats or /metrics scrape costs per member.
func BenchmarkMemberStats(b *testing.B) {
	for _, parts := range []int{64, 1000, 4000} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			m := NewMember("g", "s", discard, false)
			for i := range parts {
				m.Add(New(Config{Topic: "t", Partition: int32(i), Committed: 0, Start: 0}))
			}
			b.ReportAllocs()
			for b.Loop() {
				if st := m.Stats(); len(st.Partitions) != parts {
					b.Fatal(len(st.Partitions))
				}
			}
		})
	}
}

// BenchmarkFetchedAgainWithoutARun is what each record fetched costs a
// member while none of its fetches fails: the check that no run of
// failed fetches goes on.
func BenchmarkFetchedAgainWithoutARun(b *testing.B) {
	m := NewMember("g", "s", nil, false)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m.FetchedAgain("events", int32(i&7))
	}
}
