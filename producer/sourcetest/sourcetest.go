// Package sourcetest is the conformance suite for sources: every guarantee a
// producer.Source owes a pipeline, checked as one subtest through the public
// pipeline API (pipeline.New, Start, Stop, SourceStatus), with the outcomes
// read back at the source's broker.
//
// A source's test package runs it with a Harness, which starts a fresh broker
// (or topic, or generator) for each subtest and hands the suite a Fixture:
//
//	func TestConformance(t *testing.T) {
//		sourcetest.Run(t, sourcetest.Harness[[]byte]{
//			Start: func(t testing.TB, n int) sourcetest.Fixture[[]byte] {
//				b := startBroker(t) // released with t.Cleanup
//				return sourcetest.Fixture[[]byte]{
//					NewSource: func() (producer.Source[[]byte], error) { return mysource.New(b.Options()) },
//					Publish:   func(ctx context.Context) ([]string, error) { return b.PublishN(ctx, n) },
//					Key:       func(m *message.Message[[]byte]) string { return string(m.Data) },
//					Settled:   b.AckedCount,
//				}
//			},
//		})
//	}
//
// The subtests are:
//
//   - PermitWindow: with the stage's dispatcher held by a rate limit, every
//     feed delivers its window (so the check is not vacuous) and not one
//     message more, the stage buffer never holds more than Flow.MaxWindow()
//     messages per feed, and the pipeline never reports that the source
//     over-delivered;
//   - ReadAheadAtBroker: the same, seen from the broker: it never has
//     handed the consumers more than Flow.MaxWindow() messages per feed
//     beyond those that left the stage (Fixture.Fetched; skipped without);
//   - OneOutcomePerMessage: with the handlers succeeding and failing a
//     chosen subset (failures with acker.DispositionDiscard, which every
//     source settles for good), every message is handled once and the broker
//     counts exactly one settlement per message;
//   - CloseAfterRun: the source's Close is called once,
//     after every Run has returned, and the messages still in flight when
//     Run returned are acknowledged at the broker during the drain;
//   - DrainFlushesEverything: Stop hands every delivered message to the
//     handlers, every outcome reaches the broker before Close, and a new
//     source on the same stream delivers none of them again, only the rest;
//   - RestartKeepsDelivering: a run that fails (Fixture.Fail) is restarted
//     and the source delivers everything, with no message lost and no
//     delivery settled twice;
//   - InterruptedIsRedelivered: with every handler holding its message
//     until its context ends, the drain is cut short by the shutdown
//     timeout; the broker settles none of the interrupted messages
//     (acker.Interrupted), and a new source on the same stream delivers
//     each of them again;
//   - OutageDegradesStage: while the broker is out of reach
//     (Fixture.Outage; skipped without), the source reports it
//     (producer.RunHealth.Degrade), so that the stage is degraded with the
//     cause as its LastError rather than running; once the broker is
//     back the source reports that too (RunHealth.Recovered), the stage runs
//     again, and every message is handled and settled (a message whose
//     settlement the outage cut off is delivered again), none settled
//     twice;
//   - MemberJoinWithdraws: a second consumer joining the stream while the
//     first one's stage buffer holds a window per feed (a Kafka rebalance, where the source
//     withdraws what it buffered for a revoked partition with
//     Feed.Withdraw) loses nothing and settles no delivery twice.
//
// Outside InterruptedIsRedelivered, a pipeline is held still with a rate
// limit (Pipeline.SetRateLimit lifts it) rather than with blocked handlers: the dispatcher then leaves what the
// source delivers in the stage buffer, where Stage.Buffered counts it.
// Every subtest also fails when the pipeline logs that the source delivered
// beyond its permits or delivered messages that were dropped unacknowledged.
//
// The message count of each subtest is the larger of what the subtest needs
// to fill every feed's window twice and BOULEVARD_SOURCETEST_N (default 64).
// Every wait is a bounded wait on a condition (30 seconds).
package sourcetest

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// DefaultMessages is the number of messages a subtest publishes at least,
// unless the environment variable BOULEVARD_SOURCETEST_N says otherwise.
const DefaultMessages = 64

// ErrUnsupported is returned by a Fixture's Fail when the source cannot be
// made to fail; the restart subtest is then skipped.
var ErrUnsupported = errors.New("sourcetest: not supported by this source")

// Harness adapts one source to the suite.
type Harness[T any] struct {
	// Start prepares one subtest's fixture: a fresh, empty broker (topic,
	// generator) that will hold n messages, released with t.Cleanup. It
	// may call t.Fatal when the broker cannot start. Required.
	Start func(t testing.TB, n int) Fixture[T]
	// Feeds is how many feeds one run of a source registers (one per
	// partition, consumer, …). It bounds the stage buffer at Feeds ×
	// Flow.MaxWindow(). Zero means 1.
	Feeds int
	// Known maps the name of a subtest the source is known to fail to the
	// defect that makes it fail; that subtest is skipped, naming the
	// defect. An entry is removed once the defect is fixed.
	Known map[string]string
}

// Fixture is one subtest's broker and the way to build sources on it.
type Fixture[T any] struct {
	// NewSource builds a source on the fixture's broker. The suite calls it
	// once per pipeline it starts, at most twice per subtest. Every source
	// of a fixture consumes the same stream as the same consumer (one
	// consumer group, one subscription): a second source continues where
	// the first one left off, and when both run they share the messages.
	// Required.
	NewSource func() (producer.Source[T], error)
	// Publish publishes the fixture's n messages and returns their keys,
	// all different. The suite calls it once, after the first NewSource and
	// before it starts a pipeline. Required.
	Publish func(ctx context.Context) ([]string, error)
	// Key returns the key Publish returned for a delivered message. It is
	// called from the handlers, so it must be safe for concurrent use.
	// Required.
	Key func(m *message.Message[T]) string
	// Settled reports how many acknowledgements (acks, or failures the
	// source settled for good) the broker has counted for the published
	// messages. A broker that counts every acknowledgement counts a second
	// acknowledgement of a message twice; a broker that keeps only a
	// position (a committed Kafka offset) reports how many messages lie
	// below it. Required.
	Settled func(ctx context.Context) (int, error)
	// Fail makes the runs of the fixture's sources in progress end with an
	// error, once, so that their producer stages restart them. Nil, or an
	// error wrapping ErrUnsupported, skips the restart subtest. Failing
	// wraps a source so that it can be made to fail this way.
	Fail func(ctx context.Context) error
	// Fetched reports how many messages the broker has handed to the
	// fixture's consumers so far (pushed to them or fetched by them,
	// counting a redelivery again). Nil skips the read-ahead subtest.
	Fetched func(ctx context.Context) (int, error)
	// Outage makes the fixture's broker unreachable to its sources (it
	// refuses or drops their connections, or answers every request with
	// an error) until the restore function it returns is called, which
	// makes it reachable again. Nil skips the outage subtest.
	Outage func(ctx context.Context) (restore func(ctx context.Context) error, err error)
}

// Run runs every subtest of the suite against the sources h builds.
func Run[T any](t *testing.T, h Harness[T]) {
	t.Helper()
	if h.Start == nil {
		t.Fatal("sourcetest: Harness.Start is nil")
	}
	if h.Feeds == 0 {
		h.Feeds = 1
	}
	for _, c := range checks[T]() {
		t.Run(c.name, func(t *testing.T) {
			if defect, ok := h.Known[c.name]; ok {
				t.Skipf("known defect of this source: %s", defect)
			}
			c.run(t, h)
		})
	}
}

type check[T any] struct {
	name string
	run  func(t testing.TB, h Harness[T])
}

func checks[T any]() []check[T] {
	return []check[T]{
		// No feed ever has more than Flow.MaxWindow() messages fetched but not dispatched.
		{"PermitWindow", checkWindow[T]},
		// The broker hands a consumer no more than its window beyond what left the stage.
		{"ReadAheadAtBroker", checkReadAhead[T]},
		// Every message gets exactly one outcome, and the broker settles it once.
		{"OneOutcomePerMessage", checkOneOutcome[T]},
		// Close comes once, after every Run returned; acknowledgers keep working during the drain.
		{"CloseAfterRun", checkCloseAfterRun[T]},
		// Stop flushes every delivered message and its outcome before Close; nothing settled is delivered again.
		{"DrainFlushesEverything", checkDrain[T]},
		// A run that fails is restarted and keeps delivering, losing nothing, settling no delivery twice.
		{"RestartKeepsDelivering", checkRestart[T]},
		// A message the shutdown interrupted is not settled, and a new source delivers it again.
		{"InterruptedIsRedelivered", checkInterrupted[T]},
		// A broker out of reach degrades the stage, which runs again once it is back, losing nothing.
		{"OutageDegradesStage", checkOutage[T]},
		// A consumer joining mid-stream (a rebalance that withdraws buffered messages) loses nothing, settles no delivery twice.
		{"MemberJoinWithdraws", checkMemberJoin[T]},
	}
}

// messages is the configured message count.
func messages() int {
	if v, err := strconv.Atoi(os.Getenv("BOULEVARD_SOURCETEST_N")); err == nil && v > 0 {
		return v
	}
	return DefaultMessages
}
