package pulsar

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/panics"
)

const (
	// minNackDelay is the shortest nack delay the client is given, by
	// NackRedeliveryDelay (Validate refuses less) or by a
	// NackBackoffPolicy (nackPolicy raises less). pulsar-client-go ticks
	// every third of the first delay and its ticker panics below 3ns.
	minNackDelay = time.Millisecond
	// clientNackDelay is pulsar-client-go's NackRedeliveryDelay when none
	// is set.
	clientNackDelay = time.Minute
	// defaultNackFirst and defaultNackMax bound the delays of
	// pulsar-client-go's default NackBackoffPolicy
	// (ConsumerOptions.EnableDefaultNackBackoffPolicy): the first nack
	// waits defaultNackFirst, each redelivery doubles it, up to
	// defaultNackMax.
	defaultNackFirst = time.Second
	defaultNackMax   = 10 * time.Minute
)

// defaultNackBackoff is what the source gives the client in place of
// pulsar-client-go's default NackBackoffPolicy when
// ConsumerOptions.EnableDefaultNackBackoffPolicy is set without a policy:
// the same delays, defaultNackFirst << redeliveryCount up to
// defaultNackMax, for every count. The client's own shifts a
// time.Duration left by the count, which overflows from a count of 34 on:
// most counts from 34 to 54 give a negative delay, so a message nacked
// that often came back on the client's next tick (a third of 2s) instead
// of after 10 minutes.
type defaultNackBackoff struct{}

// Next implements pulsar.NackBackoffPolicy.
func (defaultNackBackoff) Next(redeliveryCount uint32) time.Duration {
	// 1s << 10 is past defaultNackMax already: no count shifts further.
	if redeliveryCount >= 10 {
		return defaultNackMax
	}
	return min(defaultNackFirst<<redeliveryCount, defaultNackMax)
}

// nackPolicy is what the client is given in place of the application's
// ConsumerOptions.NackBackoffPolicy: each delay the application's policy
// returns, raised to minNackDelay. A panic in the policy is recovered and
// logged as one error line, and the delay is then fallback: the consumer's
// NackRedeliveryDelay, or the client's default when none is set. Next
// allocates nothing.
type nackPolicy struct {
	user     pulsar.NackBackoffPolicy
	fallback time.Duration
	log      *slog.Logger
	attrs    []any
}

// newNackPolicy wraps user for a consumer whose NackRedeliveryDelay is
// delay (0: the client's default); log receives a panic of user.
func newNackPolicy(user pulsar.NackBackoffPolicy, delay time.Duration, log *slog.Logger) *nackPolicy {
	if delay == 0 {
		delay = clientNackDelay
	}
	delay = max(delay, minNackDelay)
	return &nackPolicy{user: user, fallback: delay, log: log, attrs: []any{
		slog.String("policy", fmt.Sprintf("%T", user)),
		slog.Duration("nack_redelivery_delay", delay),
	}}
}

// Next implements pulsar.NackBackoffPolicy.
func (p *nackPolicy) Next(redeliveryCount uint32) time.Duration {
	return max(p.next(redeliveryCount), minNackDelay)
}

// next is the application's delay, or fallback when its policy panics.
func (p *nackPolicy) next(redeliveryCount uint32) (d time.Duration) {
	d = p.fallback
	defer panics.Log(context.Background(), p.log, "pulsar NackBackoffPolicy panicked; the nack redelivery delay applies", p.attrs...)
	return p.user.Next(redeliveryCount)
}
