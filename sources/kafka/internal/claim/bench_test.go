package claim

import (
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
