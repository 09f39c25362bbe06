// Package pulsarnack chooses the nack precision Boulevard gives
// pulsar-client-go, so that a nacked message waits for its delay.
//
// pulsar-client-go (v0.21.0, negative_acks_tracker.go) files a nack under
// the deadline time.Now().Add(delay) in Unix milliseconds with its lowest
// NackPrecisionBit bits cleared, and redelivers on the first tick of its
// tracker (every third of the first delay) at or past it: the deadline
// moves earlier by up to 2^bit - 1 ms. With 2^bit ms at most the delay it
// stays after the nack, by more than the delay less 2^bit ms; above it,
// the deadline of a share of the nacks (all of them, once 2^bit ms is far
// above the delay) falls at or before the nack itself, and those messages
// come back on the next tick instead of after their delay. The client's
// default bit, 8, is therefore too coarse for delays under 256ms.
package pulsarnack

import (
	"math/bits"
	"time"
)

// ClientDefaultBit is pulsar-client-go's NackPrecisionBit when none is
// set: deadlines rounded down to a multiple of 256ms.
const ClientDefaultBit = 8

// MaxBit is the largest NackPrecisionBit whose 2^bit ms is at most d, the
// first nack delay: 0 below 2ms.
func MaxBit(d time.Duration) int64 {
	return max(int64(bits.Len64(uint64(max(d.Milliseconds(), 1))))-1, 0)
}

// Bit is the NackPrecisionBit to give the client when none is set and the
// first nack delay is d: the client's default, ClientDefaultBit, or, when
// d is under 256ms, the largest bit that keeps it (MaxBit).
func Bit(d time.Duration) *int64 {
	bit := min(ClientDefaultBit, MaxBit(d))
	return &bit
}
