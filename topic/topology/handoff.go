package topology

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// A sequenced source hands a retried letter of a key to its backend (Hold,
// or Requeue without hold queues) keeping the key taken until the letter
// comes back marked Resume. When that hand-off fails, the backend delivers
// the letter again as it was received, unmarked, and the source would hold
// it back behind its own key: the key would stall until the consumer stops.
// So the source keeps such a letter, unsettled, and hands it off again
// itself, with backoff, until the backend takes it (the letter is then
// settled) or the source closes (it is then given back, Queues.Return).
// The attempts go on for as long as the source runs, handOffMaxBackoff
// apart once the backoff has grown to it; the source logs the first
// failure and then each doubling of the failed attempts (the 2nd, 4th,
// 8th, ...), so a hand-off that keeps failing logs a line at growing
// intervals rather than one per attempt, and one more line once the
// backend takes the letter.
const (
	handOffFirstBackoff = 100 * time.Millisecond
	handOffMaxBackoff   = 10 * time.Second
	// handOffTimeout bounds one attempt's wait; the source closing ends
	// it at once.
	handOffTimeout = 30 * time.Second
)

// handOff is a letter whose hand-off failed, waiting for its next attempt.
type handOff[T any] struct {
	p       pendingLetter[T]
	what    string // "hold <name>" or "requeue", for logs
	do      func(context.Context, Letter[T]) error
	backoff time.Duration // the wait before the next attempt
	failed  int           // the attempts that failed so far
	timer   *time.Timer
}

// handOffs are a source's letters whose hand-off failed.
type handOffs[T any] struct {
	mu      sync.Mutex
	closed  bool
	waiting map[*handOff[T]]struct{}
	wg      sync.WaitGroup // attempts running
	back    []Letter[T]    // letters whose attempt ended after close
	// stop ends the attempts running when the source closes; made with
	// the first hand-off.
	ctx  context.Context
	stop context.CancelFunc
}

// retryHandOff keeps p, whose hand-off with do just failed with err, and
// tries again after a backoff. It returns false, keeping nothing, once the
// source has closed.
func (s *Source[T]) retryHandOff(p *pendingLetter[T], what string, do func(context.Context, Letter[T]) error, err error) bool {
	h := &handOff[T]{p: *p, what: what, do: do, backoff: handOffFirstBackoff, failed: 1}
	return s.handOffs.schedule(s.log, h, err, s.attemptHandOff)
}

// schedule arms h's next attempt, after h's failed one, and logs that
// failure when it makes a power of two of failed attempts (see handOffs);
// false once closed.
func (hs *handOffs[T]) schedule(log *slog.Logger, h *handOff[T], err error, attempt func(*handOff[T])) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.closed {
		return false
	}
	if hs.waiting == nil {
		hs.waiting = map[*handOff[T]]struct{}{}
		hs.ctx, hs.stop = context.WithCancel(context.Background())
	}
	if h.failed&(h.failed-1) == 0 {
		log.Error("could not hand a held key's letter to the backend; trying again",
			slog.String("to", h.what), slog.String("key", h.p.l.Key), slog.Int("failed_attempts", h.failed),
			slog.Duration("in", h.backoff), slog.Any("error", err))
	}
	hs.waiting[h] = struct{}{}
	hs.wg.Add(1)
	h.timer = time.AfterFunc(h.backoff, func() { defer hs.wg.Done(); attempt(h) })
	return true
}

// attemptHandOff hands h's letter off again: settled once the backend takes
// it; otherwise tried again later, or, after Close, given back by Close.
func (s *Source[T]) attemptHandOff(h *handOff[T]) {
	hs := &s.handOffs
	hs.mu.Lock()
	delete(hs.waiting, h)
	parent := hs.ctx
	hs.mu.Unlock()
	ctx, cancel := context.WithTimeout(parent, handOffTimeout)
	defer cancel()
	err := h.do(ctx, h.p.l)
	if err == nil {
		s.log.Info("handed a held key's letter to the backend after failed attempts",
			slog.String("to", h.what), slog.String("key", h.p.l.Key), slog.Int("failed_attempts", h.failed))
		s.done(ctx, &h.p)
		return
	}
	h.failed++
	h.backoff = min(2*h.backoff, handOffMaxBackoff)
	if !hs.schedule(s.log, h, err, s.attemptHandOff) {
		hs.mu.Lock()
		hs.back = append(hs.back, h.p.l)
		hs.mu.Unlock()
	}
}

// close stops every waiting attempt, waits for those running, and returns
// the letters still not handed off, for Close to give back.
func (hs *handOffs[T]) close() []Letter[T] {
	hs.mu.Lock()
	hs.closed = true
	if hs.stop != nil {
		hs.stop() // an attempt under way gives up its wait
	}
	var out []Letter[T]
	for h := range hs.waiting {
		if h.timer.Stop() {
			hs.wg.Done()
			out = append(out, h.p.l)
		}
	}
	clear(hs.waiting)
	hs.mu.Unlock()
	hs.wg.Wait()
	hs.mu.Lock()
	out = append(out, hs.back...)
	hs.back = nil
	hs.mu.Unlock()
	return out
}
