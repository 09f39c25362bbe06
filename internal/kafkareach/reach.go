// Package kafkareach decides when a Kafka reader cannot read from its
// cluster, and when it reads again, from what its client shows: failed
// group sessions, a client out of brokers, fetches or a group an ACL
// refuses, records coming in and the answers the client reads. The Kafka
// sources (sarama and franz-go), the Kafka topic backend and the Kafka
// topology backend report through it, so that all of them follow one
// rule.
package kafkareach

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
)

// Degrader is what a Reach reports to: the handle of a source's run
// (producer.RunHealth), a topic subscriber's topic.ReachObserver, or the
// relay a topology reader reports through to its source.
type Degrader interface {
	Degrade(err error)
	Recovered()
}

// SessionFailuresToDegrade is how many group sessions (sarama's Consume
// calls, franz-go's joins) in a row must fail, with no session started
// and no record read in between, before a member reports its stage
// degraded: a single failed session is a rebalance or a passing fault,
// the second says the member cannot read.
const SessionFailuresToDegrade = 2

// HeardQuiet is how long after the last sign that the member cannot read
// (a failed session, a client that reached no broker) an answer from the
// cluster must come to end a degrade (Reach.Heard). A cluster that
// answers the session's heartbeats while a partition's leader cannot be
// looked up fails that lookup again every Consumer.Retry.Backoff (2 s by
// default): an answer in between ends nothing, so the stage does not
// flap between degraded and running, with a line each way, at every
// retry.
const HeardQuiet = 3 * time.Second

// Reach decides when a member reports its stage degraded (it cannot read
// from the cluster) and when it reports it reads again. The rule, shared
// by both clients:
//
//   - SessionFailuresToDegrade group sessions in a row fail
//     (SessionFailed), or the client says that no broker it knows could
//     be reached (Unreachable: sarama's ErrOutOfBrokers, which it returns
//     only once it has tried every broker), or an ACL refuses the reader
//     a partition's fetch or its group (Unreachable too: sarama's
//     ErrTopicAuthorizationFailed and ErrGroupAuthorizationFailed, which
//     it goes on retrying, see SaramaError): the stage is degraded, the
//     last error as the reason;
//   - a session starts (SessionStarted) or records come in (Reading): it
//     runs again;
//   - while the member holds its session, an answer from the cluster
//     that the client reads at least HeardQuiet after the last sign
//     that it cannot read (Heard): it runs again. A refused fetch is
//     such a sign at each retry, so the stage stays degraded while the
//     refusals go on, and runs again once the permission is granted
//     back. On an idle topic the session's fetches and heartbeats are
//     those answers; without them a stage degraded by a short outage that
//     the session outlived would stay degraded until a record or the next
//     rebalance. A member without a session (between two, or whose joins
//     the group refuses) runs again only when a session starts: the group
//     may answer and still refuse it.
//
// A reader that belongs to no group (a broadcast subscriber of a Kafka
// topic, which consumes every partition itself) has no sessions to fail:
// it calls SessionStarted once it is subscribed, and is degraded only
// when its client could reach no broker or an ACL refuses its fetches
// (Unreachable, SaramaError); records or an answer after HeardQuiet end
// that.
//
// Reading and Heard are on the records' and responses' paths: when there
// is nothing to clear they are atomic loads. The zero Reach reports to no
// stage; set Health first. Health is called with Reach's lock held, one
// report at a time.
type Reach struct {
	// Health is what the member reports to: for a source, the handle of
	// the stage's run the member belongs to (producer.Stage.Health), so
	// that once that run has returned its reports change nothing; for a
	// topic member, its subscription's topic.ReachObserver; for a
	// topology reader, the relay that passes its reports on to the
	// observer its source sets.
	Health Degrader

	mu       sync.Mutex // serialises the reports to Health
	failures atomic.Int32
	degraded atomic.Bool
	session  bool      // guarded by mu: between SessionStarted and SessionEnded
	badAt    time.Time // guarded by mu: the last failed session or unreachable cluster
}

// SessionFailed notes a failed group session: the stage is degraded once
// SessionFailuresToDegrade have failed in a row.
func (r *Reach) SessionFailed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.badAt = time.Now()
	if r.failures.Add(1) >= SessionFailuresToDegrade {
		r.degradeLocked(err)
	}
}

// SaramaSessionFailed notes a group session of a sarama client that
// failed with err (sarama.ConsumerGroup.Consume's error): Unreachable
// when sarama could reach no broker (sarama.ErrOutOfBrokers),
// SessionFailed otherwise.
func (r *Reach) SaramaSessionFailed(err error) {
	if errors.Is(err, sarama.ErrOutOfBrokers) {
		r.Unreachable(err)
		return
	}
	r.SessionFailed(err)
}

// SaramaError notes an error a sarama client reported on its own (a
// consumer group's or a partition consumer's Errors): Unreachable when
// it could reach no broker (sarama.ErrOutOfBrokers, for a partition's
// leader lookup or a session's heartbeat) or when an ACL refuses the
// reader (sarama.ErrTopicAuthorizationFailed for a partition's fetch,
// sarama.ErrGroupAuthorizationFailed for its group): the client retries
// a refusal, which heals only once the permission is granted back, and
// the reader's session may stay up meanwhile while it reads nothing. Any
// other error, which the client retries, is not a sign that the reader
// cannot read.
func (r *Reach) SaramaError(err error) {
	if errors.Is(err, sarama.ErrOutOfBrokers) || errors.Is(err, sarama.ErrTopicAuthorizationFailed) ||
		errors.Is(err, sarama.ErrGroupAuthorizationFailed) {
		r.Unreachable(err)
	}
}

// Unreachable notes that the client could reach no broker, or that the
// cluster refuses it what it needs to read: the stage is degraded at
// once.
func (r *Reach) Unreachable(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.badAt = time.Now()
	r.degradeLocked(err)
}

// SessionStarted notes that the member's group session started: it reads
// (Reading), and answers the client reads from now on count (Heard).
func (r *Reach) SessionStarted() {
	r.mu.Lock()
	r.session = true
	r.mu.Unlock()
	r.Reading()
}

// SessionEnded notes that the member's group session ended (or was lost):
// until the next starts, only a session start or records end a degraded
// stage.
func (r *Reach) SessionEnded() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.session = false
}

// Heard notes that the client read an answer from the cluster. Called
// once the answer was read, it ends a degrade reported before it (a
// degrade reported after an answer is not ended by that answer), only
// while the member holds its session (its fetches and heartbeats go on,
// so it reads again), and only HeardQuiet or more after the last sign
// that the member could not read. It is one atomic load while the stage
// is not degraded.
func (r *Reach) Heard() {
	if !r.degraded.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.session && time.Since(r.badAt) >= HeardQuiet {
		r.recoverLocked()
	}
}

func (r *Reach) degradeLocked(err error) {
	r.degraded.Store(true)
	if r.Health != nil {
		r.Health.Degrade(err)
	}
}

// Reading notes that the member reads: a session started, or records
// came in. The count of failed sessions starts again, and a degraded
// stage runs again.
func (r *Reach) Reading() {
	if !r.degraded.Load() && r.failures.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recoverLocked()
}

// recoverLocked starts the count of failed sessions again and reports a
// degraded stage running.
func (r *Reach) recoverLocked() {
	r.failures.Store(0)
	if r.degraded.Swap(false) && r.Health != nil {
		r.Health.Recovered()
	}
}
