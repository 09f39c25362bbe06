// Package topologytest is the suite every topology backend passes: each
// guarantee of package topology (hold queues, retries, the DLQ and its
// death metadata, consumer groups, sequenced topics, replay) as one
// subtest, run through real pipelines over the backend's declared queues.
//
// A backend package runs it from a test:
//
//	func TestTopology(t *testing.T) {
//		topologytest.Run(t, topologytest.Config{
//			NewBackend: func(t *testing.T) topology.Backend[topologytest.Msg] { … },
//		})
//	}
//
// The hold queues of the suite are 1s and 2s long. A backend whose timers
// are the standard library's and that does no I/O sets Config.Synctest, and
// every subtest then runs in a testing/synctest bubble where those seconds
// pass at once and delays are measured exactly; the others run in real
// time, and their delays are checked within Config.Slack.
package topologytest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Msg is the payload of the suite's messages.
type Msg struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// String returns the key followed by the number: "A3".
func (m Msg) String() string { return fmt.Sprintf("%s%d", m.Key, m.N) }

// Config describes the backend under test.
type Config struct {
	// NewBackend returns a fresh backend for one subtest, registering its
	// cleanup with t (closing it). In a synctest bubble it is called inside
	// the bubble. Required.
	NewBackend func(t *testing.T) topology.Backend[Msg]
	// Synctest runs every subtest in a testing/synctest bubble.
	Synctest bool
	// Slack is how much later than its hold a retried message may be
	// delivered again (ignored with Synctest, where it is exact).
	// Default 2s.
	Slack time.Duration
	// Resolution is how much earlier than its hold a retried message may
	// be delivered again because the backend keeps due times coarser
	// than the clock reads them: a Pulsar deliver-at time is in
	// milliseconds, so a hold there may end up to 1ms early. Default 0
	// (ignored with Synctest).
	Resolution time.Duration
	// Restart, when set, simulates a crash of the process and returns a
	// backend over the same broker state: what it lost is what a crash
	// loses. Nil skips the crash test (an in-memory backend loses
	// everything by design).
	Restart func(t *testing.T, old topology.Backend[Msg]) topology.Backend[Msg]
	// Hang, when set, makes the broker of be answer no request from the
	// call until the subtest ends, as a broker that stopped responding
	// does: the closing subtest then closes the reader and the backend
	// with the broker hung. Nil closes them with the broker answering (an
	// in-memory backend has no broker to hang).
	Hang func(t *testing.T, be topology.Backend[Msg])
}

// The holds every subtest uses.
const (
	hold1 = time.Second
	hold2 = 2 * time.Second
)

type testCase struct {
	name string
	run  func(s *h)
}

var cases = []testCase{
	{"EscalatingHolds", escalatingHolds},
	{"MaxRetriesDeadLetters", maxRetriesDeadLetters},
	{"TimeoutCountsAsRetry", timeoutCountsAsRetry},
	{"DeferDoesNotCount", deferDoesNotCount},
	{"RejectWithoutDLQDiscardsWithWarning", rejectWithoutDLQ},
	{"PlainErrorsFollowDispositions", plainErrorsFollowDispositions},
	{"ConsumerGroupsHaveOwnChains", consumerGroupsHaveOwnChains},
	{"SharedNamedDLQ", sharedNamedDLQ},
	{"DeclareIsIdempotent", declareIsIdempotent},
	{"SequencedSkip", func(s *h) { sequencedTable(s, topology.Skip) }},
	{"SequencedFailAll", func(s *h) { sequencedTable(s, topology.FailAll) }},
	{"SequencedEmptyKeyNeverPoisoned", emptyKeyNeverPoisoned},
	{"SequencedOrderThroughRetries", orderThroughRetries},
	{"SequencedOrderUnderConcurrency", sequencedOrderUnderConcurrency},
	{"SequencedStopLosesNothing", sequencedStopLosesNothing},
	{"SequencedOrderHoldsAcrossStop", func(s *h) { sequencedOrderAcrossStop(s, false) }},
	{"SequencedInterruptedKeepsOrderAcrossStop", func(s *h) { sequencedOrderAcrossStop(s, true) }},
	{"DeadSourceSeesDeath", deadSourceSeesDeath},
	{"ReplayPutsBack", replayPutsBack},
	{"ReplayWhileConsumersFailReplaysEachLetterOnce", replayWhileConsumersFail},
	{"PinnedDeadReaderNeverDeliversALetterDeadLetteredAfterThePin", pinnedDeadReader},
	{"BroadcastReachesEveryConsumer", broadcastReachesEveryConsumer},
	{"CloseWithContextDoneReturnsAtOnce", closeWithContextDone},
	{"EmptyDstReturnsErrEmptyDstAndConsumesNothing", emptyDstConsumesNothing},
	{"ClosedReaderRefusesReceiveWithLettersReady", closedReaderRefuses},
	{"SettlingANilOrUnknownLetterSettlesNothing", settleNilOrUnknown},
	{"ReturnedDeadLettersComeBackFromTheDLQ", returnedDeadLetters},
	{"PublishAndDeadLetterClearResume", publishAndDeadLetterClearResume},
	{"CrashWhileHeldLosesNothing", crashWhileHeld},
	{"SettledPayloadsAreNotKept", settledPayloadsAreNotKept},
	{"ReplayedPayloadsAreNotKept", replayedPayloadsAreNotKept},
	{"UnsettledLettersAreNotKeptPastClose", unsettledLettersAreNotKeptPastClose},
	{"NilContextIsAnErrorNotAPanic", nilContextIsAnError},
	{"HeadersSurviveRequeueHoldDeadLetterAndReplay", headersSurvive},
}

// Run runs the suite against cfg's backend.
func Run(t *testing.T, cfg Config) {
	if cfg.Slack == 0 {
		cfg.Slack = 2 * time.Second
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if cfg.Synctest {
				synctest.Test(t, func(t *testing.T) { c.run(newHarness(t, cfg)) })
				return
			}
			c.run(newHarness(t, cfg))
		})
	}
}

// gap checks that b came d after a (exactly in a bubble; otherwise no
// more than Resolution early and no more than Slack late).
func (s *h) gap(what string, a, b time.Time, d time.Duration) {
	s.Helper()
	got := b.Sub(a)
	slack, early := s.cfg.Slack, s.cfg.Resolution
	if s.cfg.Synctest {
		slack, early = 0, 0
	}
	if got < d-early || got > d+slack {
		s.Errorf("%s: %s apart, want %s (-%s, +%s)", what, got, d, early, slack)
	}
}

var errFlaky = errors.New("downstream unavailable")

// Guarantee: retries escalate through the hold queues, the n-th retry
// using hold min(n-1, len-1), so a message retried twice waits the first
// plus the second hold; each delivery carries its retry count.
func escalatingHolds(s *h) {
	q := s.declare(topology.New("esc").Hold(hold1).Hold(hold2).DLQ())
	c := s.consume(q, false, topology.SourceOptions[Msg]{}, func(_ context.Context, m Msg, d *topology.Delivery) error {
		if d.Retries < 3 {
			return topology.Retry(errFlaky)
		}
		return nil
	}, nil)
	s.publish(q, Msg{N: 1})
	s.eventually("4 attempts", time.Minute, func() bool { return len(c.attempts()) == 4 })
	as := c.attempts()
	for i, a := range as {
		if a.Retries != i {
			s.Errorf("attempt %d has retry count %d", i, a.Retries)
		}
	}
	s.gap("first retry", as[0].At, as[1].At, hold1)
	s.gap("second retry", as[1].At, as[2].At, hold2)
	s.gap("third retry (stays on the last hold)", as[2].At, as[3].At, hold2)
	s.gap("retried twice", as[0].At, as[2].At, hold1+hold2)
	s.eventually("the ack", time.Minute, func() bool { return c.src.Stats().Acked == 1 })
	if st := c.src.Stats(); st.Retried != 3 || st.DeadLettered != 0 {
		s.Errorf("stats %+v, want 3 retries and no dead letter", st)
	}
}

// Guarantee: past MaxRetries a Retry dead-letters the message with reason
// max_retries and complete death metadata (error text, topic, group,
// retry count, first and last failure times).
func maxRetriesDeadLetters(s *h) {
	q := s.declare(topology.New("maxr").Hold(hold1).DLQ())
	start := time.Now()
	c := s.consume(q, false, topology.SourceOptions[Msg]{MaxRetries: 2}, func(context.Context, Msg, *topology.Delivery) error {
		return topology.Retry(errFlaky)
	}, nil)
	s.publish(q, Msg{N: 7})
	s.eventually("the dead letter", time.Minute, func() bool { return c.src.Stats().DeadLettered == 1 })
	as := c.attempts()
	if len(as) != 3 {
		s.Fatalf("%d attempts, want 3 (the first and 2 retries)", len(as))
	}
	dl := s.dead(q)
	if len(dl) != 1 {
		s.Fatalf("DLQ holds %d letters, want 1", len(dl))
	}
	d := dl[0].Death
	if dl[0].Value.N != 7 || d.Reason != topology.ReasonMaxRetries || d.Retries != 2 ||
		!strings.Contains(d.Error, errFlaky.Error()) || d.Topic != "maxr" || d.Group != "maxr" {
		s.Errorf("dead letter %v %+v", dl[0].Value, d)
	}
	if d.FirstFailure.Before(start) || !d.FirstFailure.Equal(as[0].At) && d.FirstFailure.Before(as[0].At) ||
		d.LastFailure.Before(as[2].At) || !d.LastFailure.After(d.FirstFailure) {
		s.Errorf("failure times first %v last %v, attempts at %v, %v, %v", d.FirstFailure, d.LastFailure, as[0].At, as[1].At, as[2].At)
	}
}

// Guarantee: a handler that exceeds its timeout counts as a Retry, and a
// message whose last allowed attempt timed out dies with reason timeout.
func timeoutCountsAsRetry(s *h) {
	q := s.declare(topology.New("slow").Hold(hold1).DLQ())
	c := s.consume(q, false, topology.SourceOptions[Msg]{MaxRetries: 1}, func(ctx context.Context, m Msg, d *topology.Delivery) error {
		h := topology.WithTimeout(100*time.Millisecond, func(ctx context.Context, _ *message.Message[Msg]) (Msg, error) {
			<-ctx.Done()
			return Msg{}, ctx.Err()
		})
		_, err := h(ctx, message.New(m, nil, 0))
		return err
	}, nil)
	s.publish(q, Msg{N: 1})
	s.eventually("the dead letter", time.Minute, func() bool { return c.src.Stats().DeadLettered == 1 })
	if st := c.src.Stats(); st.Retried != 1 {
		s.Errorf("stats %+v, want 1 retry", st)
	}
	dl := s.dead(q)
	if len(dl) != 1 || dl[0].Death.Reason != topology.ReasonTimeout || !strings.Contains(dl[0].Death.Error, "timed out") {
		s.Fatalf("dead letters %+v, want one with reason timeout", dl)
	}
}

// Guarantee: Defer goes back through a hold queue without counting a retry.
func deferDoesNotCount(s *h) {
	q := s.declare(topology.New("later").Hold(hold1).Hold(hold2).DLQ())
	var n atomic.Int32
	c := s.consume(q, false, topology.SourceOptions[Msg]{MaxRetries: 1}, func(context.Context, Msg, *topology.Delivery) error {
		if n.Add(1) <= 3 {
			return topology.Defer()
		}
		return nil
	}, nil)
	s.publish(q, Msg{N: 1})
	s.eventually("the ack", time.Minute, func() bool { return c.src.Stats().Acked == 1 })
	as := c.attempts()
	for i, a := range as {
		if a.Retries != 0 {
			s.Errorf("attempt %d has retry count %d, want 0", i, a.Retries)
		}
	}
	if len(as) != 4 {
		s.Fatalf("%d attempts, want 4", len(as))
	}
	s.gap("deferred", as[0].At, as[1].At, hold1)
	if st := c.src.Stats(); st.Deferred != 3 || st.Retried != 0 || st.DeadLettered != 0 {
		s.Errorf("stats %+v, want 3 deferrals past MaxRetries 1 and nothing dead", st)
	}
}

// Guarantee: a Reject on a topology without DLQ discards the message with
// one warning.
func rejectWithoutDLQ(s *h) {
	q := s.declare(topology.New("nodlq").Hold(hold1))
	c := s.consume(q, false, topology.SourceOptions[Msg]{}, func(context.Context, Msg, *topology.Delivery) error {
		return topology.Reject(errors.New("malformed"))
	}, nil)
	s.publish(q, Msg{N: 1})
	s.eventually("the discard", time.Minute, func() bool { return c.src.Stats().Discarded == 1 })
	if n := s.logs.Count(slog.LevelWarn, "message discarded"); n != 1 {
		s.Errorf("%d warnings, want 1", n)
	}
	if len(c.attempts()) != 1 {
		s.Errorf("%d attempts, want 1", len(c.attempts()))
	}
}

// Guarantee: a plain error keeps its meaning: the source's default policy
// (a retry), and a failure hook's DispositionDiscard makes it a reject.
func plainErrorsFollowDispositions(s *h) {
	q := s.declare(topology.New("plain").Hold(hold1).DLQ())
	c := s.consume(q, false, topology.SourceOptions[Msg]{}, func(_ context.Context, m Msg, d *topology.Delivery) error {
		if m.N == 1 && d.Retries == 0 {
			return errFlaky // default disposition: retried
		}
		if m.N == 2 {
			return errors.New("poison")
		}
		return nil
	}, func(_ context.Context, failed []*message.Message[Msg]) {
		for _, m := range failed {
			if m.Data.N == 2 {
				m.SetDisposition(acker.DispositionDiscard)
			}
		}
	})
	s.publish(q, Msg{N: 1}, Msg{N: 2})
	s.eventually("both settled", time.Minute, func() bool {
		st := c.src.Stats()
		return st.Acked == 1 && st.DeadLettered == 1
	})
	if st := c.src.Stats(); st.Retried != 1 {
		s.Errorf("stats %+v, want 1 retry", st)
	}
	dl := s.dead(q)
	if len(dl) != 1 || dl[0].Value.N != 2 || dl[0].Death.Reason != topology.ReasonRejected || dl[0].Death.Error != "poison" {
		s.Errorf("dead letters %+v, want message 2 rejected", dl)
	}
}

// Guarantee: two consumer groups of one topic each get every message, and
// retry and dead-letter through their own chains: neither drains the
// other's holds or DLQ.
func consumerGroupsHaveOwnChains(s *h) {
	a := s.declare(topology.New("shared").Hold(hold1).DLQ())
	b := s.declare(topology.New("shared").ForConsumerGroup("audit").Hold(hold1).DLQ())
	retryOnce := func(_ context.Context, m Msg, d *topology.Delivery) error {
		if d.Retries == 0 {
			return topology.Retry(errFlaky)
		}
		return nil
	}
	ca := s.consume(a, false, topology.SourceOptions[Msg]{}, retryOnce, nil)
	cb := s.consume(b, false, topology.SourceOptions[Msg]{}, func(ctx context.Context, m Msg, d *topology.Delivery) error {
		if m.N == 3 {
			return topology.Reject(errors.New("audit refuses 3"))
		}
		return retryOnce(ctx, m, d)
	}, nil)
	s.publish(a, Msg{N: 1}, Msg{N: 2}, Msg{N: 3})
	s.eventually("both groups done", time.Minute, func() bool {
		return ca.src.Stats().Acked == 3 && cb.src.Stats().Acked == 2 && cb.src.Stats().DeadLettered == 1
	})
	s.quiet()
	if n := len(ca.attempts()); n != 6 {
		s.Errorf("group %q handled %d attempts, want 6 (each message twice)", "shared", n)
	}
	if n := len(cb.attempts()); n != 5 {
		s.Errorf("group %q handled %d attempts, want 5", "audit", n)
	}
	if dl := s.dead(a); len(dl) != 0 {
		s.Errorf("the default group's DLQ holds %v", dl)
	}
	if dl := s.dead(b); len(dl) != 1 || dl[0].Death.Group != "audit" {
		s.Errorf("the audit group's DLQ holds %+v, want message 3", dl)
	}
}

// Guarantee: topologies naming the same DLQ share it; each dead letter
// says which group killed it, and each group's Replay sees its own only.
func sharedNamedDLQ(s *h) {
	a := s.declare(topology.New("pay").DLQNamed("all-dead"))
	b := s.declare(topology.New("pay").ForConsumerGroup("audit").DLQNamed("all-dead"))
	reject := func(context.Context, Msg, *topology.Delivery) error { return topology.Reject(nil) }
	ca := s.consume(a, false, topology.SourceOptions[Msg]{}, reject, nil)
	cb := s.consume(b, false, topology.SourceOptions[Msg]{}, reject, nil)
	s.publish(a, Msg{N: 1})
	s.eventually("both dead letters", time.Minute, func() bool {
		return ca.src.Stats().DeadLettered == 1 && cb.src.Stats().DeadLettered == 1
	})
	for _, c := range []struct {
		q     topology.Queues[Msg]
		group string
	}{{a, "pay"}, {b, "audit"}} {
		dl := s.dead(c.q)
		if len(dl) != 1 || dl[0].Death.Group != c.group || dl[0].Value.N != 1 {
			s.Errorf("group %s's replay of the shared DLQ sees %+v, want its own dead letter of message 1", c.group, dl)
		}
	}
}

// Guarantee: declaring a topology again creates nothing new and loses
// nothing: messages queued, held and dead-lettered before are still there.
func declareIsIdempotent(s *h) {
	b := topology.New("again").Hold(hold1).DLQ()
	q1 := s.declare(b)
	s.publish(q1, Msg{N: 1}, Msg{N: 2}, Msg{N: 3})
	q2 := s.declare(b)
	c := s.consume(q2, false, topology.SourceOptions[Msg]{}, func(_ context.Context, m Msg, d *topology.Delivery) error {
		switch {
		case m.N == 2 && d.Retries == 0:
			return topology.Retry(errFlaky)
		case m.N == 3:
			return topology.Reject(nil)
		}
		return nil
	}, nil)
	s.eventually("the retry held", time.Minute, func() bool { return c.src.Stats().Retried == 1 })
	q3 := s.declare(b)
	s.eventually("everything settled", time.Minute, func() bool {
		st := c.src.Stats()
		return st.Acked == 2 && st.DeadLettered == 1
	})
	if dl := s.dead(q3); len(dl) != 1 || dl[0].Value.N != 3 {
		s.Errorf("DLQ after a third declaration holds %v", dl)
	}
}

// Guarantee: given messages 1–5 of key A with 3 rejected, Skip acks
// 1,2,4,5 and dead-letters 3; FailAll acks 1,2 and dead-letters 3,4,5 with
// reason poisoned; key B is handled in full, in order, either way.
func sequencedTable(s *h, policy topology.SequenceFailure) {
	q := s.declare(topology.New("ledger").Sequenced(policy).RoutingShards(4).DLQ())
	c := s.consume(q, false, topology.SourceOptions[Msg]{}, func(_ context.Context, m Msg, _ *topology.Delivery) error {
		if m.Key == "A" && m.N == 3 {
			return topology.Reject(errors.New("overdrawn"))
		}
		return nil
	}, nil)
	var msgs []Msg
	for n := 1; n <= 5; n++ {
		msgs = append(msgs, Msg{Key: "A", N: n}, Msg{Key: "B", N: n})
	}
	s.publish(q, msgs...)
	wantAcked, wantDead, wantA := 9, 1, "A1 A2 A3 A4 A5"
	if policy == topology.FailAll {
		wantAcked, wantDead, wantA = 7, 3, "A1 A2 A3"
	}
	s.eventually("all settled", time.Minute, func() bool {
		st := c.src.Stats()
		return int(st.Acked) == wantAcked && int(st.DeadLettered) == wantDead
	})
	s.quiet()
	if got := names(c.of("A")); got != wantA {
		s.Errorf("key A handled %s, want %s", got, wantA)
	}
	if got := names(c.of("B")); got != "B1 B2 B3 B4 B5" {
		s.Errorf("key B handled %s, want B1 to B5 in order", got)
	}
	dl := s.dead(q)
	var dead []string
	for _, l := range dl {
		dead = append(dead, l.Value.String()+":"+string(l.Death.Reason))
	}
	want := "A3:rejected"
	if policy == topology.FailAll {
		want = "A3:poisoned A4:poisoned A5:poisoned"
	}
	if got := strings.Join(dead, " "); got != want {
		s.Errorf("dead letters %s, want %s", got, want)
	}
	if policy == topology.FailAll {
		// The key stays poisoned for the consumer's lifetime.
		s.publish(q, Msg{Key: "A", N: 6}, Msg{Key: "B", N: 6})
		s.eventually("A6 dead, B6 acked", time.Minute, func() bool {
			st := c.src.Stats()
			return st.DeadLettered == 4 && st.Acked == 8
		})
	}
}

// Guarantee: under FailAll the empty key is never poisoned: a rejected
// message without key dies alone.
func emptyKeyNeverPoisoned(s *h) {
	q := s.declare(topology.New("nokey").Sequenced(topology.FailAll).DLQ())
	c := s.consume(q, false, topology.SourceOptions[Msg]{}, func(_ context.Context, m Msg, _ *topology.Delivery) error {
		if m.N == 1 {
			return topology.Reject(nil)
		}
		return nil
	}, nil)
	s.publish(q, Msg{N: 1}, Msg{N: 2}, Msg{N: 3})
	s.eventually("all settled", time.Minute, func() bool {
		st := c.src.Stats()
		return st.Acked == 2 && st.DeadLettered == 1
	})
	if dl := s.dead(q); len(dl) != 1 || dl[0].Death.Reason != topology.ReasonRejected {
		s.Errorf("dead letters %+v, want one rejected", dl)
	}
}

// Guarantee: per key, messages are handled in publish order through
// retries: a retrying message holds back the later messages of its key
// only, never those of other keys.
func orderThroughRetries(s *h) {
	q := s.declare(topology.New("ordered").Sequenced(topology.Skip).Hold(hold1).Hold(hold2).DLQ())
	c := s.consume(q, false, topology.SourceOptions[Msg]{}, func(_ context.Context, m Msg, d *topology.Delivery) error {
		if m.Key == "A" && m.N == 2 && d.Retries < 2 {
			return topology.Retry(errFlaky)
		}
		return nil
	}, nil)
	var msgs []Msg
	for n := 1; n <= 5; n++ {
		msgs = append(msgs, Msg{Key: "A", N: n}, Msg{Key: "B", N: n})
	}
	s.publish(q, msgs...)
	s.eventually("all acked", time.Minute, func() bool { return c.src.Stats().Acked == 10 })
	if got := names(c.of("A")); got != "A1 A2 A2 A2 A3 A4 A5" {
		s.Errorf("key A handled %s, want A1 A2 A2 A2 A3 A4 A5", got)
	}
	if got := names(c.of("B")); got != "B1 B2 B3 B4 B5" {
		s.Errorf("key B handled %s", got)
	}
	a, b := c.of("A"), c.of("B")
	if !b[4].At.Before(a[2].At) {
		s.Errorf("B5 was handled at %v, after A2's first retry at %v: key B waited for key A", b[4].At, a[2].At)
	}
	s.gap("A3 after A2's last retry", a[0].At, a[4].At, hold1+hold2)
}

// Guarantee: with several producer stages and processors, many keys and
// retries scattered among them, every key is still handled in publish
// order, each message until it succeeds.
func sequencedOrderUnderConcurrency(s *h) {
	const keys, perKey = 16, 12
	q := s.declare(topology.New("busy").Sequenced(topology.Skip).Hold(hold1).Hold(hold2).DLQ())
	s.producers = 2
	c := s.consume(q, false, topology.SourceOptions[Msg]{MaxBatch: 8}, func(_ context.Context, m Msg, d *topology.Delivery) error {
		// A fixed, scattered set of messages fails once or twice.
		if (m.N*7+len(m.Key)*3+int(m.Key[len(m.Key)-1]))%5 == 0 && d.Retries < 1+m.N%2 {
			return topology.Retry(errFlaky)
		}
		return nil
	}, nil)
	var msgs []Msg
	for n := 1; n <= perKey; n++ {
		for k := range keys {
			msgs = append(msgs, Msg{Key: fmt.Sprintf("k%d", k), N: n})
		}
	}
	s.publish(q, msgs...)
	s.eventually("all acked", time.Minute, func() bool { return c.src.Stats().Acked == keys*perKey })
	if st := c.src.Stats(); st.Retried == 0 {
		s.Fatalf("no retry happened: the test checks nothing")
	}
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		var got []int
		for _, a := range c.of(key) {
			if len(got) == 0 || got[len(got)-1] != a.N {
				got = append(got, a.N)
			}
		}
		want := make([]int, perKey)
		for i := range want {
			want[i] = i + 1
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			s.Errorf("key %s handled %v (repeats folded), want %v", key, got, want)
		}
	}
}

// Guarantee: stopping a sequenced consumer while it holds messages back
// behind a held retry loses none of them: the next consumer handles them
// all.
func sequencedStopLosesNothing(s *h) {
	b := topology.New("pause").Sequenced(topology.Skip).Hold(hold1).DLQ()
	q := s.declare(b)
	c1 := s.consume(q, false, topology.SourceOptions[Msg]{}, func(_ context.Context, m Msg, _ *topology.Delivery) error {
		if m.Key == "A" && m.N == 1 {
			return topology.Retry(errFlaky)
		}
		return nil
	}, nil)
	s.publish(q, Msg{Key: "A", N: 1}, Msg{Key: "A", N: 2}, Msg{Key: "A", N: 3}, Msg{Key: "B", N: 1})
	s.eventually("A2 and A3 held back", time.Minute, func() bool {
		st := c1.src.Stats()
		return st.HeldBack == 2 && st.Acked == 1
	})
	s.stop(c1)
	c2 := s.consume(q, false, topology.SourceOptions[Msg]{}, func(context.Context, Msg, *topology.Delivery) error { return nil }, nil)
	s.eventually("A1 to A3 handled by the next consumer", time.Minute, func() bool { return c2.src.Stats().Acked == 3 })
	got := map[string]bool{}
	for _, a := range c2.of("A") {
		got[a.String()] = true
	}
	if len(got) != 3 {
		s.Errorf("the next consumer handled %v, want A1, A2 and A3", got)
	}
}

// Guarantee: a key's order holds across a stop of its sequenced consumer.
// A1 is in flight and A2 held back when the pipeline starts to stop, and A3
// is published once the source has stopped reading: the next consumer
// handles A2 before A3. A1 is either handled during the drain or, when
// interrupt is set, its handling is cut short by the shutdown timeout: the
// next consumer then handles it again, before A2.
func sequencedOrderAcrossStop(s *h, interrupt bool) {
	name := "resume"
	if interrupt {
		name = "resume-cut"
		s.shutdown = hold2
	}
	q := s.declare(topology.New(name).Sequenced(topology.Skip).Hold(hold1).DLQ())
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	defer open()
	c1 := s.consume(q, false, topology.SourceOptions[Msg]{}, func(ctx context.Context, m Msg, _ *topology.Delivery) error {
		if m.N == 1 {
			if interrupt {
				<-ctx.Done()
				return ctx.Err()
			}
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}, nil)
	s.shutdown = 0
	c1.cut.Store(interrupt)
	s.publish(q, Msg{Key: "A", N: 1}, Msg{Key: "A", N: 2})
	s.eventually("A1 in flight and A2 held back", time.Minute, func() bool {
		return len(c1.of("A")) == 1 && c1.src.Stats().HeldBack == 1
	})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		s.stop(c1)
	}()
	defer func() {
		open()
		<-stopped
	}()
	s.eventually("the source stopped reading", time.Minute, func() bool {
		st := c1.p.SourceStatus()
		return len(st) > 0 && st[0].State == producer.StateStopped
	})
	s.publish(q, Msg{Key: "A", N: 3})
	open()
	<-stopped
	c2 := s.consume(q, false, topology.SourceOptions[Msg]{}, func(context.Context, Msg, *topology.Delivery) error { return nil }, nil)
	s.eventually("A2 and A3 handled by the next consumer", time.Minute, func() bool {
		var seen [4]bool
		for _, a := range c2.of("A") {
			seen[a.N] = true
		}
		return seen[2] && seen[3]
	})
	// A delivery repeated at once (at least once) is folded.
	var got []string
	for _, a := range append(c1.of("A"), c2.of("A")...) {
		if n := a.String(); len(got) == 0 || got[len(got)-1] != n {
			got = append(got, n)
		}
	}
	if g := strings.Join(got, " "); g != "A1 A2 A3" {
		s.Errorf("key A handled %s across the stop (repeats folded), want A1 A2 A3", g)
	}
}

// Guarantee: a DLQ is consumable as a pipeline source whose messages carry
// their death metadata; a handled dead letter leaves the DLQ, a failed one
// goes back to it.
func deadSourceSeesDeath(s *h) {
	q := s.declare(topology.New("graveyard").DLQ())
	s.consume(q, false, topology.SourceOptions[Msg]{}, func(context.Context, Msg, *topology.Delivery) error {
		return topology.Reject(errors.New("bad amount"))
	}, nil)
	s.publish(q, Msg{N: 1}, Msg{N: 2})
	var mu sync.Mutex
	var seen []string
	keep := true
	dc := s.consume(q, true, topology.SourceOptions[Msg]{}, func(_ context.Context, m Msg, d *topology.Delivery) error {
		hd := topology.HandleDead(func(_ context.Context, v Msg, death topology.Death) (Msg, error) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, fmt.Sprintf("%v:%s:%s:%s", v, death.Reason, death.Error, death.Topic))
			if v.N == 2 && keep {
				keep = false
				return v, errors.New("not yet")
			}
			return v, nil
		})
		mm := message.New(m, nil, 0)
		mm.Metadata = d
		_, err := hd(context.Background(), mm)
		return err
	}, nil)
	s.eventually("both dead letters handled", time.Minute, func() bool { return dc.src.Stats().Acked == 2 })
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 || !strings.Contains(seen[0], "rejected:bad amount:graveyard") {
		s.Errorf("dead handler saw %q", seen)
	}
	if dl := s.dead(q); len(dl) != 0 {
		s.Errorf("DLQ still holds %v", dl)
	}
}

// Guarantee: Replay puts the dead letters its filter selects back on the
// main topic, with a fresh history, where they are handled again; a dry run
// only reports; the others stay dead.
func replayPutsBack(s *h) {
	q := s.declare(topology.New("replay").DLQ())
	var fixed atomic.Bool
	c := s.consume(q, false, topology.SourceOptions[Msg]{}, func(_ context.Context, m Msg, d *topology.Delivery) error {
		if !fixed.Load() || m.N == 3 {
			return topology.Reject(errors.New("bug"))
		}
		return nil
	}, nil)
	s.publish(q, Msg{N: 1}, Msg{N: 2}, Msg{N: 3})
	s.eventually("three dead", time.Minute, func() bool { return c.src.Stats().DeadLettered == 3 })
	s.quiet()
	pick := func(l *topology.Letter[Msg]) bool { return l.Value.N != 2 }
	dry, err := topology.Replay(s.ctx, q, topology.ReplayOptions[Msg]{Filter: pick, DryRun: true})
	if err != nil || len(dry.Replayed) != 2 || dry.Kept != 3 {
		s.Fatalf("dry run: %+v, %v; want 2 selected and 3 kept", dry, err)
	}
	if len(s.dead(q)) != 3 {
		s.Fatalf("a dry run changed the DLQ")
	}
	fixed.Store(true)
	rep, err := topology.Replay(s.ctx, q, topology.ReplayOptions[Msg]{Filter: pick})
	if err != nil || len(rep.Replayed) != 2 || rep.Kept != 1 {
		s.Fatalf("replay: %+v, %v; want 2 replayed and 1 kept", rep, err)
	}
	s.eventually("message 1 acked and 3 dead again", time.Minute, func() bool {
		st := c.src.Stats()
		return st.Acked == 1 && st.DeadLettered == 4
	})
	as := c.attempts()
	if last := as[len(as)-1]; last.Retries != 0 {
		s.Errorf("a replayed message arrived with retry count %d", last.Retries)
	}
	var left []int
	for _, l := range s.dead(q) {
		left = append(left, l.Value.N)
	}
	// Message 3 dies again in the consumer while Replay puts message 2
	// back: which reaches a networked DLQ first is a race.
	slices.Sort(left)
	if fmt.Sprint(left) != "[2 3]" {
		s.Errorf("DLQ holds %v, want [2 3]", left)
	}
}

// Guarantee: Replay, with the topology's consumers failing every letter
// it replays, offers each letter the DLQ held to its filter once and
// replays it once: a replayed letter that fails again and comes back to
// the DLQ while Replay runs is not read again. The filter waits, before
// each letter after the first, until the letter replayed before it is
// dead again, so that it is in the DLQ as Replay reads on.
func replayWhileConsumersFail(s *h) {
	q := s.declare(topology.New("refail").DLQ())
	c := s.consume(q, false, topology.SourceOptions[Msg]{}, func(context.Context, Msg, *topology.Delivery) error {
		return topology.Reject(errors.New("bug"))
	}, nil)
	s.publish(q, Msg{N: 1}, Msg{N: 2}, Msg{N: 3})
	s.eventually("three dead", time.Minute, func() bool { return c.src.Stats().DeadLettered == 3 })
	s.quiet()
	var offered []int
	rep, err := topology.Replay(s.ctx, q, topology.ReplayOptions[Msg]{Filter: func(l *topology.Letter[Msg]) bool {
		offered = append(offered, l.Value.N)
		if k := len(offered); k > 3 {
			return false
		} else if k > 1 {
			s.eventually(fmt.Sprintf("replayed letter %d dead again", k-1), time.Minute, func() bool {
				return c.src.Stats().DeadLettered >= uint64(3+k-1)
			})
		}
		return true
	}})
	if err != nil || rep.ReplayedCount != 3 || len(offered) != 3 {
		s.Fatalf("Replay offered %v to its filter and returned %d replayed, %d kept, %v; want each of 3 letters offered and replayed once",
			offered, rep.ReplayedCount, rep.Kept, err)
	}
	s.eventually("the three replayed letters dead again", time.Minute, func() bool { return c.src.Stats().DeadLettered == 6 })
	s.quiet()
	if left := s.deadNs(q); left != "[1 2 3]" {
		s.Errorf("DLQ holds %v, want [1 2 3]", left)
	}
}

// Guarantee: a DLQ reader whose end is pinned (topology.EndPinner)
// delivers the letters the DLQ held at the pin, then nothing: TryReceive
// returns 0 while letters dead-lettered after the pin wait in the DLQ,
// which its next reader delivers; a second PinEnd leaves the end where
// the first put it. A backend whose DLQ reader does not pin its end skips
// it.
func pinnedDeadReader(s *h) {
	q := s.declare(topology.New("pinned").DLQ())
	deadLetter := func(ns ...int) {
		s.Helper()
		for _, n := range ns {
			l := topology.Letter[Msg]{Value: Msg{Key: "P", N: n}, Death: &topology.Death{Reason: topology.ReasonRejected,
				Error: "rejected", Topic: "pinned", Group: "pinned"}}
			if err := q.DeadLetter(s.ctx, l); err != nil {
				s.Fatalf("DeadLetter %v: %v", l.Value, err)
			}
		}
	}
	deadLetter(1, 2)
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	r, err := q.SubscribeDead(ctx)
	if err != nil {
		s.Fatalf("SubscribeDead: %v", err)
	}
	defer MustClose(s.T, "the DLQ reader", r.Close)
	p, ok := r.(topology.EndPinner)
	if !ok {
		s.Skip("the backend's DLQ reader does not pin its end")
	}
	if err := p.PinEnd(ctx); err != nil {
		s.Fatalf("PinEnd: %v", err)
	}
	deadLetter(3, 4)
	if err := p.PinEnd(ctx); err != nil {
		s.Fatalf("a second PinEnd: %v", err)
	}
	var got []int
	buf := make([]topology.Letter[Msg], 4)
	for zeros := 0; zeros < 2; {
		n, err := r.TryReceive(ctx, buf)
		if err != nil {
			s.Fatalf("TryReceive with %v received: %v", got, err)
		}
		if n == 0 {
			zeros++
		}
		for i := range buf[:n] {
			got = append(got, buf[i].Value.N)
			if err := r.Settle(ctx, &buf[i]); err != nil {
				s.Errorf("Settle %v: %v", buf[i].Value, err)
			}
		}
	}
	if fmt.Sprint(got) != "[1 2]" {
		s.Errorf("the pinned DLQ reader delivered %v, want [1 2], those dead-lettered before the pin", got)
	}
	MustClose(s.T, "the DLQ reader", r.Close)
	if left := s.deadNs(q); left != "[3 4]" {
		s.Errorf("the DLQ's next reader delivered %v, want [3 4]", left)
	}
}

// Guarantee: on a broadcast topology every consumer receives every
// message, and a retry (there is no hold queue) discards with a warning.
func broadcastReachesEveryConsumer(s *h) {
	q := s.declare(topology.New("ticks").Broadcast())
	ok := func(_ context.Context, m Msg, _ *topology.Delivery) error {
		if m.N == 2 {
			return topology.Retry(errFlaky)
		}
		return nil
	}
	c1 := s.consume(q, false, topology.SourceOptions[Msg]{}, ok, nil)
	c2 := s.consume(q, false, topology.SourceOptions[Msg]{}, ok, nil)
	s.eventually("both subscribed", time.Minute, func() bool {
		return c1.src.Stats().Subscriptions == 1 && c2.src.Stats().Subscriptions == 1
	})
	s.publish(q, Msg{N: 1}, Msg{N: 2}, Msg{N: 3})
	s.eventually("both consumers done", time.Minute, func() bool {
		return c1.src.Stats().Acked == 2 && c2.src.Stats().Acked == 2 &&
			c1.src.Stats().Discarded == 1 && c2.src.Stats().Discarded == 1
	})
	if n := s.logs.Count(slog.LevelWarn, "message discarded"); n != 2 {
		s.Errorf("%d warnings, want 2", n)
	}
}

// Guarantee: a reader's Close and the backend's Close, given a context
// already done, return at once without waiting for the broker (nil, or an
// error wrapping the context's error), even with a letter settled and not
// yet committed and, with Config.Hang, a broker that no longer answers;
// the reader and the backend are closed from then on (ErrClosed); and the
// closing that was cut short ends: a later Close with time to spare waits
// for it and returns nil.
func closeWithContextDone(s *h) {
	b := topology.New("closing").Hold(hold1).DLQ()
	q := s.declare(b)
	r, err := q.Subscribe(s.ctx)
	if err != nil {
		s.Fatalf("Subscribe: %v", err)
	}
	s.publish(q, Msg{N: 1})
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	buf := make([]topology.Letter[Msg], 1)
	if _, err := r.Receive(ctx, buf); err != nil {
		s.Fatalf("Receive: %v", err)
	}
	if err := r.Settle(ctx, &buf[0]); err != nil {
		s.Fatalf("Settle: %v", err)
	}
	if s.cfg.Hang != nil {
		s.cfg.Hang(s.T, s.be)
	}
	done, stop := context.WithCancel(context.WithoutCancel(s.ctx))
	stop()
	for _, c := range []struct {
		what   string
		close  func(context.Context) error
		closed func() error
	}{
		{"a reader", r.Close, func() error { _, err := r.TryReceive(ctx, buf); return err }},
		{"the backend", s.be.Close, func() error { _, err := s.be.Declare(s.ctx, q.Topology()); return err }},
	} {
		if err := s.closes(done, c.what, c.close, 10*time.Second); err != nil && !errors.Is(err, context.Canceled) {
			s.Errorf("closing %s with a context already done = %v, want nil or an error wrapping context.Canceled", c.what, err)
		}
		if err := c.closed(); !errors.Is(err, topology.ErrClosed) {
			s.Errorf("%s, once closed: %v, want ErrClosed", c.what, err)
		}
	}
	later, cancelLater := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancelLater()
	if err := s.closes(later, "the reader again", r.Close, 40*time.Second); err != nil {
		s.Errorf("closing the reader again, with 30s to spare = %v, want nil: the closing cut short still runs", err)
	}
	if err := s.closes(later, "the backend again", s.be.Close, 40*time.Second); err != nil {
		s.Errorf("closing the backend again, with 30s to spare = %v, want nil: the closing cut short still runs", err)
	}
}

// readerCase is one kind of reader, how to subscribe it and how to put
// a letter where it reads.
type readerCase struct {
	what      string
	subscribe func(context.Context) (topology.Reader[Msg], error)
	put       func(Msg)
}

// threeReaders declares the topology name with a DLQ and its broadcast
// twin name-bc, and returns a group's reader, a DLQ reader and a
// broadcast reader of them.
func (s *h) threeReaders(name string) []readerCase {
	q := s.declare(topology.New(name).DLQ())
	bq := s.declare(topology.New(name + "-bc").Broadcast())
	deadLetter := func(m Msg) {
		s.Helper()
		l := topology.Letter[Msg]{Value: m, Death: &topology.Death{Reason: topology.ReasonRejected, Error: "rejected",
			Topic: name, Group: name}}
		if err := q.DeadLetter(s.ctx, l); err != nil {
			s.Fatalf("DeadLetter %v: %v", m, err)
		}
	}
	return []readerCase{
		{"a group's reader", q.Subscribe, func(m Msg) { s.publish(q, m) }},
		{"a DLQ reader", q.SubscribeDead, deadLetter},
		{"a broadcast reader", bq.Subscribe, func(m Msg) { s.publish(bq, m) }},
	}
}

// Guarantee: Receive and TryReceive given a nil or empty dst return 0 and
// topology.ErrEmptyDst at once, without panicking or waiting, whatever
// their context and whether the reader is open or closed, and consume
// nothing: on a group's reader, a DLQ reader and a broadcast reader, the
// letters put before the calls (one of them likely ready at the reader)
// and after them are all received afterwards by a Receive with room.
func emptyDstConsumesNothing(s *h) {
	for _, c := range s.threeReaders("emptydst") {
		r, err := c.subscribe(s.ctx)
		if err != nil {
			s.Fatalf("%s: subscribing: %v", c.what, err)
		}
		s.Cleanup(func() { MustClose(s.T, c.what, r.Close) })
		c.put(Msg{Key: "E", N: 1})
		c.put(Msg{Key: "E", N: 2})
		seen := map[int]bool{}
		s.receiveInto(c.what, r, seen, 1, 1) // the other is likely ready now
		s.emptyDst(c.what, r)
		c.put(Msg{Key: "E", N: 3})
		s.receiveInto(c.what, r, seen, 4, 3)
		for n := 1; n <= 3; n++ {
			if !seen[n] {
				s.Errorf("%s: E%d never received", c.what, n)
			}
		}
		MustClose(s.T, c.what, r.Close)
		s.emptyDst(c.what+", closed", r)
	}
}

// Guarantee: once a reader is closed, Receive and TryReceive both return
// 0 and topology.ErrClosed, whatever their context, even with letters
// ready for the reader: a closed reader hands out nothing (the group's
// next reader receives what it left), on a group's reader, a DLQ reader
// and a broadcast reader alike.
func closedReaderRefuses(s *h) {
	for _, c := range s.threeReaders("closedrd") {
		r, err := c.subscribe(s.ctx)
		if err != nil {
			s.Fatalf("%s: subscribing: %v", c.what, err)
		}
		for n := 1; n <= 3; n++ {
			c.put(Msg{Key: "C", N: n})
		}
		// One received: the others are likely ready at the reader now.
		s.receiveInto(c.what, r, map[int]bool{}, 1, 1)
		MustClose(s.T, c.what, r.Close)
		buf := make([]topology.Letter[Msg], 4)
		s.eachReceiveCall(r, func(call, ctxName string, ctx context.Context, receive receiveFunc) {
			// Repeated: a reader that picks between its letters and its
			// closing at random gives a letter sooner or later.
			for range 20 {
				n, err := receive(ctx, buf)
				if n != 0 || !errors.Is(err, topology.ErrClosed) {
					s.Errorf("%s, closed: %s%s = %d, %v; want 0, ErrClosed", c.what, call, ctxName, n, err)
					break
				}
			}
		})
	}
}

// Guarantee: Settle given a nil letter, or one the reader did not hand
// out (no receipt), returns nil without panicking, whether the reader is
// open or closed, on a group's reader, a DLQ reader and a broadcast reader
// alike.
func settleNilOrUnknown(s *h) {
	for _, c := range s.threeReaders("settlenil") {
		r, err := c.subscribe(s.ctx)
		if err != nil {
			s.Fatalf("%s: subscribing: %v", c.what, err)
		}
		for _, state := range []string{"open", "closed"} {
			if state == "closed" {
				MustClose(s.T, c.what, r.Close)
			}
			if err := r.Settle(s.ctx, nil); err != nil {
				s.Errorf("%s, %s: Settle of a nil letter = %v, want nil", c.what, state, err)
			}
			if err := r.Settle(s.ctx, &topology.Letter[Msg]{Value: Msg{Key: "U", N: 1}}); err != nil {
				s.Errorf("%s, %s: Settle of a letter it did not hand out = %v, want nil", c.what, state, err)
			}
		}
	}
}

// Guarantee: dead letters given back with Queues.Return, unsettled, come
// back from the DLQ, in their order, to the DLQ's next reader (Replay
// gives back so the letters it can neither replay nor put back).
func returnedDeadLetters(s *h) {
	q := s.declare(topology.New("returned").DLQ())
	for n := 1; n <= 3; n++ {
		l := topology.Letter[Msg]{Value: Msg{Key: "R", N: n}, Death: &topology.Death{Reason: topology.ReasonRejected,
			Error: "rejected", Topic: "returned", Group: "returned"}}
		if err := q.DeadLetter(s.ctx, l); err != nil {
			s.Fatalf("DeadLetter %v: %v", l.Value, err)
		}
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	receive := func(r topology.Reader[Msg], settle bool) []topology.Letter[Msg] {
		s.Helper()
		var got []topology.Letter[Msg]
		buf := make([]topology.Letter[Msg], 4)
		for len(got) < 3 {
			n, err := r.Receive(ctx, buf)
			if err != nil {
				s.Fatalf("Receive with %d of 3 dead letters received: %v", len(got), err)
			}
			for i := range buf[:n] {
				if settle {
					if err := r.Settle(ctx, &buf[i]); err != nil {
						s.Errorf("Settle %v: %v", buf[i].Value, err)
					}
				}
				got = append(got, buf[i])
			}
		}
		return got
	}
	r, err := q.SubscribeDead(s.ctx)
	if err != nil {
		s.Fatalf("SubscribeDead: %v", err)
	}
	if err := q.Return(ctx, receive(r, false)); err != nil {
		s.Fatalf("Return of 3 dead letters: %v", err)
	}
	MustClose(s.T, "the first DLQ reader", r.Close)
	r2, err := q.SubscribeDead(s.ctx)
	if err != nil {
		s.Fatalf("SubscribeDead again: %v", err)
	}
	defer MustClose(s.T, "the second DLQ reader", r2.Close)
	var got []string
	for _, l := range receive(r2, true) {
		if l.Death == nil {
			s.Errorf("%v came back without its death", l.Value)
		}
		got = append(got, l.Value.String())
	}
	if fmt.Sprint(got) != "[R1 R2 R3]" {
		s.Errorf("the DLQ delivered %v after Return, want [R1 R2 R3]", got)
	}
}

// Guarantee: Publish and DeadLetter clear Letter.Resume (Queues): a
// letter published, or dead-lettered, with it set comes back without it,
// so that a sequenced source never takes a new message, nor a dead letter
// replayed or read by a dead source, for a retry of its key coming back.
func publishAndDeadLetterClearResume(s *h) {
	q := s.declare(topology.New("resumed").Sequenced(topology.Skip).DLQ())
	l := topology.Letter[Msg]{Value: Msg{Key: "A", N: 1}, Key: "A", Retries: 1, Resume: true}
	if err := q.Publish(s.ctx, l); err != nil {
		s.Fatalf("Publish: %v", err)
	}
	l.Death = &topology.Death{Reason: topology.ReasonRejected, Topic: "resumed", Group: "resumed", Retries: 1}
	if err := q.DeadLetter(s.ctx, l); err != nil {
		s.Fatalf("DeadLetter: %v", err)
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	for _, c := range []struct {
		what      string
		subscribe func(context.Context) (topology.Reader[Msg], error)
	}{{"published", q.Subscribe}, {"dead-lettered", q.SubscribeDead}} {
		r, err := c.subscribe(ctx)
		if err != nil {
			s.Fatalf("subscribing to the %s letter: %v", c.what, err)
		}
		buf := make([]topology.Letter[Msg], 1)
		n, err := r.Receive(ctx, buf)
		if err != nil || n != 1 {
			s.Fatalf("Receive of the %s letter = %d, %v", c.what, n, err)
		}
		if buf[0].Resume {
			s.Errorf("the letter %s with Resume set came back with it set, want it cleared", c.what)
		}
		if err := r.Settle(ctx, &buf[0]); err != nil {
			s.Errorf("Settle the %s letter: %v", c.what, err)
		}
		MustClose(s.T, "the reader of the "+c.what+" letter", r.Close)
	}
}

// emptyDst checks that r's Receive and TryReceive, given a nil or empty
// dst, with a live context or one already done, return 0, ErrEmptyDst
// and write nothing into dst's backing array.
func (s *h) emptyDst(what string, r topology.Reader[Msg]) {
	s.Helper()
	backing := make([]topology.Letter[Msg], 1)
	s.eachReceiveCall(r, func(call, ctxName string, ctx context.Context, receive receiveFunc) {
		for _, d := range []struct {
			name string
			dst  []topology.Letter[Msg]
		}{{"a nil dst", nil}, {"an empty dst", backing[:0]}} {
			p, n, err := recovered(func() (int, error) { return receive(ctx, d.dst) })
			switch {
			case p != nil:
				s.Errorf("%s: %s with %s%s panicked: %v", what, call, d.name, ctxName, p)
			case n != 0 || !errors.Is(err, topology.ErrEmptyDst):
				s.Errorf("%s: %s with %s%s = %d, %v; want 0, ErrEmptyDst", what, call, d.name, ctxName, n, err)
			}
		}
	})
	if l := backing[0]; l.Value != (Msg{}) || l.Receipt != nil {
		s.Errorf("%s: a call with an empty dst wrote %v past its length", what, l.Value)
	}
}

// receiveFunc is a reader's Receive or TryReceive.
type receiveFunc func(context.Context, []topology.Letter[Msg]) (int, error)

// eachReceiveCall calls f with each of r's receive methods (call names
// it: "Receive", "TryReceive") under each of a live context (for 10s)
// and one already done; ctxName is what a failure message says of the
// context after the call: "" and ", its context done".
func (s *h) eachReceiveCall(r topology.Reader[Msg], f func(call, ctxName string, ctx context.Context, receive receiveFunc)) {
	s.Helper()
	live, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	done, stop := context.WithCancel(s.ctx)
	stop()
	for _, cx := range []struct {
		name string
		ctx  context.Context
	}{{"", live}, {", its context done", done}} {
		for _, call := range []struct {
			name string
			f    receiveFunc
		}{{"Receive", r.Receive}, {"TryReceive", r.TryReceive}} {
			f(call.name, cx.name, cx.ctx, call.f)
		}
	}
}

// recovered calls f and returns its results, or the value it panicked
// with.
func recovered(f func() (int, error)) (p any, n int, err error) {
	defer func() { p = recover() }()
	n, err = f()
	return nil, n, err
}

// receiveInto receives from r, size letters at a time, settling each and
// marking its number in seen, until seen holds want numbers; within a
// minute.
func (s *h) receiveInto(what string, r topology.Reader[Msg], seen map[int]bool, size, want int) {
	s.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	buf := make([]topology.Letter[Msg], size)
	for len(seen) < want {
		n, err := r.Receive(ctx, buf)
		if err != nil {
			s.Fatalf("%s: Receive with %d of %d letters seen: %v", what, len(seen), want, err)
		}
		for i := range buf[:n] {
			if seen[buf[i].Value.N] {
				s.Errorf("%s: %v received twice", what, buf[i].Value)
			}
			seen[buf[i].Value.N] = true
			if err := r.Settle(ctx, &buf[i]); err != nil {
				s.Errorf("%s: Settle %v: %v", what, buf[i].Value, err)
			}
		}
	}
}

// Guarantee: a crash while messages are held loses nothing: after a
// restart they are delivered when due.
func crashWhileHeld(s *h) {
	if s.cfg.Restart == nil {
		s.Skip("the backend keeps nothing across a restart (Config.Restart is nil)")
	}
	b := topology.New("durable").Hold(hold1).DLQ()
	q := s.declare(b)
	c := s.consume(q, false, topology.SourceOptions[Msg]{}, func(context.Context, Msg, *topology.Delivery) error {
		return topology.Retry(errFlaky)
	}, nil)
	s.publish(q, Msg{N: 1}, Msg{N: 2})
	// At least: a message released from its hold before the restart is
	// retried again.
	s.eventually("both held", time.Minute, func() bool { return c.src.Stats().Retried >= 2 })
	c.crashed.Store(true)
	s.be = s.cfg.Restart(s.T, s.be)
	q = s.declare(b)
	// Which messages came back, not how many acks: a backend may deliver a
	// letter released just before the restart twice (at least once).
	var seen [3]atomic.Bool
	c2 := s.consume(q, false, topology.SourceOptions[Msg]{}, func(_ context.Context, m Msg, _ *topology.Delivery) error {
		if m.N >= 1 && m.N <= 2 {
			seen[m.N].Store(true)
		}
		return nil
	}, nil)
	s.eventually("both delivered after the restart", time.Minute, func() bool { return seen[1].Load() && seen[2].Load() })
	if st := c2.src.Stats(); st.DeadLettered != 0 {
		s.Fatalf("after the restart %d messages went to the DLQ, want none", st.DeadLettered)
	}
}

func names(as []attempt) string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return strings.Join(out, " ")
}

// Guarantee: the headers a Publisher gives a message (Letter.Headers)
// reach every delivery of it unchanged, after a Requeue (Defer) and a
// Hold (Retry) as on the first, stay on its dead letter, and come back
// with it when Replay puts it back; a name starting with
// ReservedHeaderPrefix the Publisher gives is dropped, and changes
// nothing of the letter's history.
func headersSurvive(s *h) {
	q := s.declare(topology.New("headed").Hold(hold1).DLQ())
	want := topic.Headers{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "x-tenant": "acme"}
	var fixed atomic.Bool
	var calls atomic.Int32
	c := s.consume(q, false, topology.SourceOptions[Msg]{MaxRetries: 1}, func(context.Context, Msg, *topology.Delivery) error {
		switch {
		case fixed.Load():
			return nil
		case calls.Add(1) == 1:
			return topology.Defer()
		}
		return topology.Retry(errFlaky)
	}, nil)
	p, err := topology.NewPublisher(q, topology.PublisherOptions[Msg]{Headers: func(context.Context, Msg) topic.Headers {
		h := maps.Clone(want)
		h["topology-retries"] = "7"
		h[topology.ReservedHeaderPrefix+"custom"] = "x"
		return h
	}})
	if err != nil {
		s.Fatalf("NewPublisher: %v", err)
	}
	if err := p.Publish(s.ctx, Msg{N: 1}); err != nil {
		s.Fatalf("Publish: %v", err)
	}
	s.eventually("the dead letter", time.Minute, func() bool { return c.src.Stats().DeadLettered == 1 })
	check := func(what string, got topic.Headers) {
		s.Helper()
		if !maps.Equal(got, want) {
			s.Errorf("%s carries headers %v, want %v", what, got, want)
		}
	}
	as := c.attempts()
	if len(as) < 3 {
		s.Fatalf("%d attempts before the dead letter, want 3 (first, requeued, held)", len(as))
	}
	for i, a := range as {
		check(fmt.Sprintf("attempt %d (retries %d)", i, a.Retries), a.Headers)
	}
	if as[0].Retries != 0 {
		s.Errorf("the first attempt has retry count %d, want 0: a reserved header changed the history", as[0].Retries)
	}
	s.quiet()
	dl := s.dead(q)
	if len(dl) != 1 {
		s.Fatalf("DLQ holds %d letters, want 1", len(dl))
	}
	check("the dead letter", dl[0].Headers)
	fixed.Store(true)
	if rep, err := topology.Replay(s.ctx, q, topology.ReplayOptions[Msg]{}); err != nil || rep.ReplayedCount != 1 {
		s.Fatalf("Replay: %+v, %v; want 1 replayed", rep, err)
	}
	s.eventually("the replayed message acked", time.Minute, func() bool { return c.src.Stats().Acked == 1 })
	as = c.attempts()
	check("the replayed attempt", as[len(as)-1].Headers)
}
