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
	// A claim whose advances go nowhere, as a member's with CommitInterval.
	p := New(Config{Topic: "t", Policy: FailureCommit, OnAdvance: func(int64) {}})
	succ := make([]acker.Outcome, 8)
	next := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		p.mu.Lock()
		for i := range uint64(64) {
			p.cp.Track(next + i)
		}
		p.mu.Unlock()
		for c := uint64(0); c < 64; c += 8 {
			for i := range succ {
				succ[i] = acker.Outcome{ID: next + c + uint64(i)}
			}
			p.Ack(b.Context(), succ, nil)
		}
		next += 64
	}
}

// BenchmarkAckFailed measures BenchmarkAck's path with every message
// failed under FailureCommit: each chunk is committed past and counted
// (Claim.CommittedPast).
func BenchmarkAckFailed(b *testing.B) {
	errFailed := errors.New("failed")
	p := New(Config{Topic: "t", Policy: FailureCommit, OnAdvance: func(int64) {}})
	failed := make([]acker.Outcome, 8)
	next := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		p.mu.Lock()
		for i := range uint64(64) {
			p.cp.Track(next + i)
		}
		p.mu.Unlock()
		for c := uint64(0); c < 64; c += 8 {
			for i := range failed {
				failed[i] = acker.Outcome{ID: next + c + uint64(i), Err: errFailed}
			}
			p.Ack(b.Context(), nil, failed)
		}
		next += 64
	}
	if got, want := p.CommittedPast.Load(), int64(next); got != want {
		b.Fatalf("CommittedPast = %d, want %d", got, want)
	}
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
