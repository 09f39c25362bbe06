// Package lifecycle is the part of a Kafka source's life that does not
// depend on its client (sarama in package kafka, franz-go in package
// franz): the set of group members the source runs, one per producer
// stage, how Run waits on a member, how Close releases them all, the
// connection checks still running, the stats snapshot and the member's
// logger.
package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

// Member is one consumer-group member of a source: one producer stage's
// Run, with its own client.
type Member interface {
	comparable
	// Drain stops delivering: the member stops fetching but stays in the
	// group, so that what it delivered can still be acknowledged and
	// committed, until Close, or until a rebalance reaches it first, when
	// it commits what was handled and leaves rather than keep its
	// partitions or take new ones.
	Drain()
	// Failed receives the error that ends the member when it cannot go on.
	Failed() <-chan error
	// Close commits what was handled, leaves the group and closes the
	// client, waiting for in-flight messages until ctx ends.
	Close(ctx context.Context) error
	// Stats is the member's snapshot.
	Stats() claim.MemberStats
}

// Members is the set of live members of one source, and whether the source
// is closed. The zero value is an open source with no member.
type Members[M Member] struct {
	probes claim.Probes // connection checks still closing their connections

	mu     sync.Mutex
	live   map[M]struct{}
	closed bool
	// closes has one channel per Close still closing, closed once the
	// members it took are closed.
	closes []chan struct{}
	// gone holds, per stage, the counts of the members Run forgot (they
	// failed): Stats adds them to the stage's live member, so that its
	// totals do not start again from 0 when the stage runs a new one.
	gone map[string]goneCounts
}

// goneCounts are the counters of a stage's members that are gone.
type goneCounts struct {
	rebalances, commits, commitErrors int64
	lastErr                           *claim.CommitError
}

// Closed reports whether Close has been called.
func (s *Members[M]) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Add registers m as live, unless the source is closed: it then returns
// false and the caller releases m itself.
func (s *Members[M]) Add(m M) bool {
	s.mu.Lock()
	if s.live == nil {
		s.live = make(map[M]struct{}) // the zero Members is ready to use
	}
	live := s.live
	s.mu.Unlock()
	return liveset.Add(&s.mu, &s.closed, live, m)
}

// CheckBrokers runs probe for every bootstrap broker at once, in rounds
// until timeout when they fail at once (see claim.Probes.Check): nil as
// soon as one answers or when ctx ends, else an error wrapping
// claim.ErrConnect that names every broker, and claim.ErrClosed once the
// source is closed. The probes still running when it returns are ended
// (see claim.Probes.Check); Close waits for them, and ends them when its
// ctx ends.
func (s *Members[M]) CheckBrokers(ctx context.Context, brokers []string, timeout time.Duration,
	log *slog.Logger, final func(error) bool, probe func(ctx context.Context, addr string) error) error {
	return s.probes.Check(ctx, &s.mu, &s.closed, brokers, timeout, log, final, probe)
}

// Run starts a member with start and feeds it until ctx ends: the member
// then drains and Run returns nil; it stays live until Close. When the
// member fails first, Run closes it, forgets it and returns its error.
// start returns the zero M and a nil error when ctx ended before the
// member started; its error is returned as it is.
func (s *Members[M]) Run(ctx context.Context, start func() (M, error)) error {
	var none M
	m, err := start()
	if err != nil || m == none {
		return err
	}
	select {
	case <-ctx.Done():
		m.Drain()
		return nil
	case err := <-m.Failed():
		_ = m.Close(ctx) // the member's own failure is what Run reports
		s.forget(m)
		return err
	}
}

// forget drops m, closed, from the live members and keeps its counts for
// its stage, at once: a reading sees them either in m or in gone.
func (s *Members[M]) forget(m M) {
	st := m.Stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, m)
	if s.gone == nil {
		s.gone = make(map[string]goneCounts)
	}
	g := s.gone[st.Stage]
	g.rebalances += st.Rebalances
	g.commits += st.Commits
	g.commitErrors += st.CommitErrors
	if st.LastCommitError != nil {
		g.lastErr = st.LastCommitError
	}
	s.gone[st.Stage] = g
}

// Close marks the source closed, waits for the connection checks still
// running (ending them when ctx ends, then waiting for them to return)
// and closes every live member at once, returning their errors joined.
// A Close called while another one closes the members waits for those
// closes too, until ctx ends: it then returns an error wrapping ctx.Err().
func (s *Members[M]) Close(ctx context.Context) error {
	// Each Close is listed before it takes the members: a Close that
	// finds them taken by another one waits for that one's closing.
	done := make(chan struct{})
	s.mu.Lock()
	s.closes = append(s.closes, done)
	s.mu.Unlock()
	ms := liveset.Close(&s.mu, &s.closed, s.live)
	s.probes.Wait(ctx)
	err := liveset.CloseEach(ms, func(m M) error { return m.Close(ctx) })
	close(done)
	s.mu.Lock()
	// A finished Close is waited for by none: its entry goes, so that
	// Close called again and again does not grow the list.
	s.closes = slices.DeleteFunc(s.closes, func(c chan struct{}) bool { return c == done })
	closes := slices.Clone(s.closes)
	s.mu.Unlock()
	for _, c := range closes {
		select {
		case <-c:
			continue
		default:
		}
		select {
		case <-c:
		case <-ctx.Done():
			return errors.Join(err, fmt.Errorf("kafka: close: members another Close releases are still closing: %w", ctx.Err()))
		}
	}
	return err
}

// Stats is the snapshot of every live member, for the group groupID. The
// counters of a stage's member (Rebalances, Commits, CommitErrors) include
// those of the members of that stage Run forgot, and its LastCommitError
// is theirs while it has none: they are the stage's totals and never go
// down when a stage's Run starts a new member. With two live members of a
// stage (one drained, one running) the counts gone are the newest
// generation's, as /metrics exports that member's series.
func (s *Members[M]) Stats(groupID string) claim.Stats {
	s.mu.Lock()
	ms := make([]M, 0, len(s.live))
	for m := range s.live {
		ms = append(ms, m)
	}
	gone := make(map[string]goneCounts, len(s.gone))
	for stage, g := range s.gone {
		gone[stage] = g
	}
	s.mu.Unlock()
	st := make([]claim.MemberStats, 0, len(ms))
	for _, m := range ms {
		st = append(st, m.Stats())
	}
	if len(gone) > 0 {
		addGone(st, gone)
	}
	return claim.SourceStats(groupID, st)
}

// addGone adds to each stage's member of the newest generation the counts
// of that stage's members gone.
func addGone(st []claim.MemberStats, gone map[string]goneCounts) {
	to := make(map[string]int, len(gone))
	for i, m := range st {
		if _, ok := gone[m.Stage]; !ok {
			continue
		}
		if j, ok := to[m.Stage]; !ok || m.GenerationID > st[j].GenerationID {
			to[m.Stage] = i
		}
	}
	for stage, i := range to {
		g, m := gone[stage], &st[i]
		m.Rebalances += g.rebalances
		m.Commits += g.commits
		m.CommitErrors += g.commitErrors
		if m.LastCommitError == nil {
			m.LastCommitError = g.lastErr
		}
	}
}

// Logger is the logger of a member run by stage: logger (the source's
// Options.Logger) with the stage name, else the stage's own, else
// slog.Default() with the stage name.
func Logger(logger *slog.Logger, stage *producer.Stage[[]byte]) *slog.Logger {
	if logger == nil && stage.Logger() != nil {
		return stage.Logger()
	}
	return cmp.Or(logger, slog.Default()).With(slog.String("stage", stage.Name()))
}
