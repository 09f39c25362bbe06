package pipeline_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gridSource is a test source that behaves like a broker consumer: each
// producer stage opens `feeds` feeds, and each feed delivers only as many
// messages as it has been granted. It hands out `perFeed` messages per feed
// (0 = unlimited, until its context ends) and records, per feed, every grant
// and the largest outstanding window seen (granted - dispatched).
type gridSource struct {
	producer.Basic
	feeds   int
	perFeed int
	ack     acker.Acknowledger
	// keyOf, when set, sets each message's batch key.
	keyOf func(id uint64) string
	// partKeyOf, when set, sets each message's partition key.
	partKeyOf func(id uint64) string
	// ordered is what Ordered reports.
	ordered bool

	mu    sync.Mutex
	stats map[string]*feedRecord
	// fail, when set, is returned by Run (after delivering nothing).
	fail func(stage int) error
	runs int
}

type feedRecord struct {
	grants         []int
	maxOutstanding int
	delivered      int
}

// id packs stage, feed and sequence into a message id.
func gridID(stage, feed, seq int) uint64 {
	return uint64(stage)<<48 | uint64(feed)<<32 | uint64(seq)
}

func (s *gridSource) record(name string) *feedRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stats == nil {
		s.stats = make(map[string]*feedRecord)
	}
	r := &feedRecord{}
	s.stats[name] = r
	return r
}

func (s *gridSource) Run(ctx context.Context, st *producer.Stage[uint64]) error {
	s.mu.Lock()
	s.runs++
	s.mu.Unlock()
	if s.fail != nil {
		if err := s.fail(st.Index()); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for f := range s.feeds {
		name := fmt.Sprintf("s%d-f%d", st.Index(), f)
		rec := s.record(name)
		grants := newGrantBox()
		feed := st.NewFeed(name, grants.grant)
		wg.Add(1)
		go func() {
			defer wg.Done()
			have, received, seq := 0, 0, 0
			take := func() {
				for _, n := range grants.take() {
					have += n
					received += n
					s.noteGrant(rec, n, received-feed.Stats().Dispatched)
				}
			}
			for s.perFeed == 0 || seq < s.perFeed {
				for have == 0 {
					select {
					case <-grants.wake:
						take()
					case <-ctx.Done():
						return
					}
				}
				id := gridID(st.Index(), f, seq)
				m := message.New(id, s.ack, id)
				if s.keyOf != nil {
					m.SetBatchKey(s.keyOf(id))
				}
				if s.partKeyOf != nil {
					m.SetPartitionKey(s.partKeyOf(id))
				}
				feed.Deliver(m)
				have--
				seq++
				s.mu.Lock()
				rec.delivered++
				s.mu.Unlock()
				// Take grants that arrived meanwhile without waiting.
				take()
			}
		}()
	}
	if s.perFeed == 0 {
		<-ctx.Done()
		return nil
	}
	wg.Wait()
	return nil
}

// grantBox is a push-model feed's grant callback that never blocks, as the
// callback must not: it keeps each grant until the source takes them, and
// wakes the source through wake.
type grantBox struct {
	wake    chan struct{}
	mu      sync.Mutex
	pending []int
}

func newGrantBox() *grantBox { return &grantBox{wake: make(chan struct{}, 1)} }

func (b *grantBox) grant(n int) {
	b.mu.Lock()
	b.pending = append(b.pending, n)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// take returns the grants received since the last take, in order.
func (b *grantBox) take() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pending
	b.pending = nil
	return p
}

// Info reports s.ordered.
func (s *gridSource) Info() (producer.Info, error) { return producer.Info{Ordered: s.ordered}, nil }

// noteGrant records a grant of n and the window it opened: permits the
// source has received minus messages that have left the stage buffer.
func (s *gridSource) noteGrant(rec *feedRecord, n, outstanding int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec.grants = append(rec.grants, n)
	rec.maxOutstanding = max(rec.maxOutstanding, outstanding)
}

func (s *gridSource) records() map[string]feedRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]feedRecord, len(s.stats))
	for k, v := range s.stats {
		out[k] = feedRecord{grants: append([]int(nil), v.grants...), maxOutstanding: v.maxOutstanding, delivered: v.delivered}
	}
	return out
}

// nilDeliveringSource delivers m1, nil, m2 on one pull feed, then waits
// for its context: a misbehaving source, whose nil the processors drop.
type nilDeliveringSource struct {
	producer.Basic
	ack     acker.Acknowledger
	ordered bool
}

func (s *nilDeliveringSource) Info() (producer.Info, error) {
	return producer.Info{Ordered: s.ordered}, nil
}

func (s *nilDeliveringSource) Run(ctx context.Context, st *producer.Stage[uint64]) error {
	f := st.NewFeed("f", nil)
	if _, err := f.Acquire(ctx, 3); err != nil {
		return nil
	}
	f.Deliver(message.New[uint64](1, s.ack, 1), nil, message.New[uint64](2, s.ack, 2))
	<-ctx.Done()
	return nil
}

// Guarantee: a nil message a source delivers is dropped and the others are
// handled, also when the processors are partitioned (by a PartitionBy, or
// by an ordered source's partition key, whose computation must not touch
// the nil), whether the delivery goes straight to the processors or
// through the dispatcher (here under a rate limit).
func TestNilMessageFromSourceIsDroppedByPartitionedProcessors(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		for _, limited := range []bool{false, true} {
			t.Run(fmt.Sprintf("ordered=%v/rate-limited=%v", ordered, limited), func(t *testing.T) {
				rec := acker.NewRecorder(false)
				o := pipeline.Options[uint64, uint64]{
					Name:       "nil-partitioned",
					Producer:   producer.Options[uint64]{Source: &nilDeliveringSource{ack: rec, ordered: ordered}},
					Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: identity},
				}
				if !ordered {
					o.Processors.PartitionBy = func(m *message.Message[uint64]) string { return fmt.Sprint(m.Data) }
				}
				if limited {
					o.Producer.RateLimit = &producer.RateLimit{Allowed: 1000, Interval: time.Second}
				}
				p := mustNew(t, o)
				if err := p.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := rec.Wait(ctx, 2); err != nil {
					t.Errorf("%d outcomes, want the 2 non-nil messages'", rec.Total())
				}
				if err := p.Stop(ctx); err != nil {
					t.Fatalf("Stop = %v", err)
				}
			})
		}
	}
}
