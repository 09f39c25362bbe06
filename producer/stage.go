package producer

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/message"
)

// dispatchChunk is the largest number of messages a stage hands to the
// processors (and charges to feeds) at once.
const dispatchChunk = 64

// Output is where producer stages hand their messages: the processors'
// input. Publish blocks while the processors are busy (that is the
// backpressure the permit window rests on) and returns how many messages it
// took before an error.
type Output[T any] interface {
	Publish(ctx context.Context, msgs []*message.Message[T]) (int, error)
}

// Stage is one producer stage: the handle a Source's Run receives. It owns
// the stage buffer that the source's feeds deliver into and the goroutine
// that moves buffered messages to the processors, charging permits as they
// leave.
type Stage[T any] struct {
	index int
	name  string
	log   *slog.Logger
	flow  Flow
	out   Output[T]
	gate  *gate

	mu       sync.Mutex
	pending  []entry[T]
	finished bool
	feeds    []*Feed[T]
	wake     chan struct{}
}

type entry[T any] struct {
	msg  *message.Message[T]
	feed *Feed[T]
}

// Index is the stage's position among the pipeline's producer stages, from 0
// to Concurrency-1.
func (s *Stage[T]) Index() int { return s.index }

// Name is the stage's name, "<pipeline>.producer.<index>".
func (s *Stage[T]) Name() string { return s.name }

// Logger is the pipeline's logger, annotated with the stage name.
func (s *Stage[T]) Logger() *slog.Logger { return s.log }

// Flow is the permit window every feed of this stage gets.
func (s *Stage[T]) Flow() Flow { return s.flow }

// Buffered reports how many delivered messages wait in the stage buffer.
func (s *Stage[T]) Buffered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// NewFeed registers one flow-controlled consumer of the source (a Pulsar
// consumer, a Kafka partition, …) under name. grant is called with the number
// of messages the consumer may fetch: once with Flow.Initial before NewFeed
// returns, then with Flow.Refill each time the feed's remaining permits fall
// to Flow.Threshold. grant is called from the stage's dispatching goroutine
// and must not block (record the permits, wake a fetch loop, send a Flow
// command asynchronously); a panic in it is recovered and logged.
//
// The feed is closed, and gets no more grants, when Run returns or when the
// source calls Feed.Close.
func (s *Stage[T]) NewFeed(name string, grant func(n int)) *Feed[T] {
	f := &Feed[T]{stage: s, name: name, grant: grant}
	f.remaining.Store(int64(s.flow.Initial))
	s.mu.Lock()
	s.feeds = append(s.feeds, f)
	s.mu.Unlock()
	f.give(s.flow.Initial)
	return f
}

func (s *Stage[T]) closeFeeds() {
	s.mu.Lock()
	feeds := s.feeds
	s.feeds = nil
	s.mu.Unlock()
	for _, f := range feeds {
		f.closed.Store(true)
	}
}

func (s *Stage[T]) deliver(f *Feed[T], msgs []*message.Message[T]) {
	s.mu.Lock()
	if s.finished {
		s.mu.Unlock()
		s.log.Warn("messages delivered after the source's Run returned are dropped unacknowledged",
			slog.String("feed", f.name), slog.Int("messages", len(msgs)))
		return
	}
	for _, m := range msgs {
		s.pending = append(s.pending, entry[T]{msg: m, feed: f})
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// finish marks the source as done delivering; the dispatcher exits once the
// buffer is empty.
func (s *Stage[T]) finish() {
	s.mu.Lock()
	s.finished = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// dispatch moves buffered messages to the output until the source has
// finished and the buffer is empty, or until ctx (the pipeline's hard-stop
// context) is cancelled, in which case what is left stays unacknowledged.
func (s *Stage[T]) dispatch(ctx context.Context) {
	var work []entry[T]
	msgs := make([]*message.Message[T], 0, dispatchChunk)
	for {
		s.mu.Lock()
		for len(s.pending) == 0 {
			if s.finished {
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			select {
			case <-s.wake:
			case <-ctx.Done():
				return
			}
			s.mu.Lock()
		}
		work, s.pending = s.pending, work[:0]
		s.mu.Unlock()

		for i := 0; i < len(work); {
			if ctx.Err() != nil {
				// Hard stop: an Output with room may accept messages even
				// with a cancelled ctx, so do not offer them.
				s.leftBehind(len(work) - i)
				return
			}
			n, err := s.gate.take(ctx, min(dispatchChunk, len(work)-i))
			if err != nil {
				s.leftBehind(len(work) - i)
				return
			}
			msgs = msgs[:0]
			for _, e := range work[i : i+n] {
				msgs = append(msgs, e.msg)
			}
			k, err := s.out.Publish(ctx, msgs)
			s.charge(work[i : i+k])
			if err != nil {
				s.leftBehind(len(work) - i - k)
				return
			}
			i += n
		}
		clear(work)
		clear(msgs[:cap(msgs)])
	}
}

func (s *Stage[T]) leftBehind(n int) {
	s.mu.Lock()
	n += len(s.pending)
	s.mu.Unlock()
	if n > 0 {
		s.log.Warn("producer stage stopped before dispatching every buffered message; they stay unacknowledged",
			slog.Int("messages", n))
	}
}

// charge charges one permit per entry to its feed, in runs of the same feed.
func (s *Stage[T]) charge(es []entry[T]) {
	for i := 0; i < len(es); {
		f := es[i].feed
		j := i + 1
		for j < len(es) && es[j].feed == f {
			j++
		}
		f.charge(j - i)
		i = j
	}
}

// run calls the source's Run until ctx is cancelled, the source is
// exhausted, or it failed too often.
func (s *Stage[T]) run(ctx context.Context, src Source[T], rs Restart) error {
	defer s.finish()
	var failures []time.Time
	for {
		err := s.runOnce(ctx, src)
		s.closeFeeds()
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			s.log.Info("source exhausted")
			return nil
		}
		now := time.Now()
		kept := failures[:0]
		for _, t := range failures {
			if now.Sub(t) < rs.Window {
				kept = append(kept, t)
			}
		}
		failures = append(kept, now)
		if len(failures) > rs.MaxRestarts {
			return &RestartError{Stage: s.name, Restarts: len(failures) - 1, Window: rs.Window, Last: err}
		}
		backoff := rs.Backoff << (len(failures) - 1)
		if backoff > rs.MaxBackoff || backoff <= 0 {
			backoff = rs.MaxBackoff
		}
		s.log.Warn("source failed; restarting",
			slog.Any("error", err), slog.Int("failures_in_window", len(failures)), slog.Duration("backoff", backoff))
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}

func (s *Stage[T]) runOnce(ctx context.Context, src Source[T]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &message.PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return src.Run(ctx, s)
}

// Feed is one flow-controlled consumer of a source within a producer stage.
// Deliver and Close may be called from any goroutine.
type Feed[T any] struct {
	stage *Stage[T]
	name  string
	grant func(int)

	closed     atomic.Bool
	remaining  atomic.Int64
	granted    atomic.Int64
	delivered  atomic.Int64
	dispatched atomic.Int64
}

// Name is the name the feed was registered with.
func (f *Feed[T]) Name() string { return f.name }

// Deliver puts messages into the stage buffer. It never blocks: a source
// that respects its grants cannot overfill the buffer. Messages delivered
// after Run returned are dropped (not acknowledged) and logged.
func (f *Feed[T]) Deliver(msgs ...*message.Message[T]) {
	if len(msgs) == 0 {
		return
	}
	f.delivered.Add(int64(len(msgs)))
	f.stage.deliver(f, msgs)
}

// Close stops the feed from receiving further grants, for a consumer that
// ends before Run returns. Messages it already delivered are still
// dispatched.
func (f *Feed[T]) Close() { f.closed.Store(true) }

// FeedStats are a feed's counters.
type FeedStats struct {
	// Remaining is the permits granted and not yet charged: how many more
	// messages the consumer may have fetched or may fetch.
	Remaining int
	// Granted is the total number of permits granted.
	Granted int
	// Delivered is the number of messages the source delivered.
	Delivered int
	// Dispatched is the number of messages that left the stage buffer.
	Dispatched int
}

// Stats returns the feed's counters.
func (f *Feed[T]) Stats() FeedStats {
	return FeedStats{
		Remaining:  int(f.remaining.Load()),
		Granted:    int(f.granted.Load()),
		Delivered:  int(f.delivered.Load()),
		Dispatched: int(f.dispatched.Load()),
	}
}

func (f *Feed[T]) charge(n int) {
	f.dispatched.Add(int64(n))
	rem := f.remaining.Add(-int64(n))
	flow := f.stage.flow
	for rem <= int64(flow.Threshold) && !f.closed.Load() {
		rem = f.remaining.Add(int64(flow.Refill))
		f.give(flow.Refill)
	}
}

func (f *Feed[T]) give(n int) {
	if f.closed.Load() {
		return
	}
	f.granted.Add(int64(n))
	defer func() {
		if r := recover(); r != nil {
			f.stage.log.Error("feed grant callback panicked",
				slog.String("feed", f.name), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
		}
	}()
	f.grant(n)
}

func stageName(pipeline string, i int) string { return fmt.Sprintf("%s.producer.%d", pipeline, i) }
