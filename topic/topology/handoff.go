package topology

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/internal/panics"
	"github.com/boulevard-go/boulevard/message"
)

// A source hands letters off to its backend: a hold, a requeue, a
// dead-lettering, a dead source's putting back on the DLQ. When the
// backend fails such a hand-off (a broker refusing the hold topic or the
// DLQ, an ACL taken away, a quota), settling the letter as it is would
// cost it: a durable backend would not commit it (Kafka's commits of its
// partition stop behind it until a rebalance) or would deliver it again
// to the handler only for the hand-off to fail again, the in-memory one
// would lose it; and a sequenced source's retried letter of a key, which
// keeps the key taken until it comes back marked Resume, would come back
// unmarked and stall its key. So the source keeps such a letter,
// unsettled, and hands it off again itself, with backoff, until the
// backend takes it (the letter is then settled) or the source closes (it
// is then given back, Queues.Return). A hand-off failing with ErrClosed
// (the backend closing) is not kept, but for a sequenced key's letter out.
// The attempts go on for as long as the source runs, handOffMaxBackoff
// apart once the backoff has grown to it. A letter's first failure and
// each doubling of its failed attempts (the 2nd, 4th, 8th, ...) are the
// failures worth a line, and so is the backend taking a letter at last;
// the lines of all the source's letters are kept to one a kind per
// logburst.Interval (refusedHoldLog, retriedHoldLog), the others counted
// and their count carried by the next line or logged at Close, so that a
// backend refusing MaxHeldBack letters for hours costs a few lines an
// interval, not some per letter.
//
// The letters so kept wait in one queue ordered by the time of their next
// attempt, on one timer: when it fires, the attempts due are made one at
// a time, so that a backend that stops answering holds one attempt at a
// time (for at most handOffTimeout), not one per letter.
//
// Any source keeps, the same way, a letter whose hand-off (hold, requeue,
// dead-letter) the backend refuses for room (ErrFull: an in-memory queue
// is full), sequenced or not, in one queue of letters kept (keep): they
// are handed off again in the order they were refused, later hand-offs
// going behind them, and the source takes no new letters while any is
// kept, so that a bad day bounds its memory instead of losing letters.
const (
	handOffFirstBackoff = 100 * time.Millisecond
	handOffMaxBackoff   = 10 * time.Second
	// handOffTimeout bounds one attempt's wait; the source closing ends
	// it at once.
	handOffTimeout = 30 * time.Second
)

// handOff is a letter whose hand-off failed, waiting for its next attempt.
type handOff[T any] struct {
	p       pendingLetter[T] // as received: settled once handed off, given back at Close
	l       Letter[T]        // what is handed off
	kind    handOffKind
	hold    int           // the hold queue, for handOffHold
	backoff time.Duration // the wait before the next attempt
	failed  int           // the attempts that failed so far
	due     time.Time     // when the next attempt is
	// chained marks a dead-lettering of a poisoned key (a sequenced
	// FailAll source's): while it is kept, the key's later ones wait
	// behind it (handOffs.chains).
	chained bool
}

// handOffQueue is a min-heap of hand-offs by due time.
type handOffQueue[T any] []*handOff[T]

func (q handOffQueue[T]) Len() int           { return len(q) }
func (q handOffQueue[T]) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q handOffQueue[T]) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *handOffQueue[T]) Push(x any)        { *q = append(*q, x.(*handOff[T])) }
func (q *handOffQueue[T]) Pop() any {
	old := *q
	n := len(old) - 1
	h := old[n]
	old[n] = nil
	*q = old[:n]
	return h
}

// handOffs are a source's letters whose hand-off failed.
type handOffs[T any] struct {
	mu     sync.Mutex
	closed bool
	// waiting are the hand-offs waiting for their next attempt, earliest
	// first; retryTimer fires at retryAt (zero: not armed) for the
	// earliest, unless retrying is set: its attempts are being made, and
	// the timer is armed again after them.
	waiting    handOffQueue[T]
	retryTimer *time.Timer
	retryAt    time.Time
	retrying   bool
	// retries counts the letters kept in waiting or under way, at most
	// retryLimit (SourceOptions.MaxHeldBack) before the source takes no
	// new letters: retryFull is set, and retryRoom is closed once it
	// drops below the limit.
	retries    int
	retryLimit int
	retryFull  atomic.Bool
	retryRoom  chan struct{}
	wg         sync.WaitGroup // attempts running
	back       []Letter[T]    // letters whose attempt ended after close
	// stop ends the attempts running when the source closes; made with
	// the first hand-off.
	ctx  context.Context
	stop context.CancelFunc
	// chains holds, for each poisoned key whose dead-lettering is kept
	// (chained), the key's later dead-letterings, in order: they wait
	// behind it, counted in retries, and are handed off, in order, once
	// the backend takes it, so that the DLQ keeps the key's order.
	// chainsN is len(chains), read without the lock.
	chains  map[string][]*handOff[T]
	chainsN atomic.Int64

	// kept are the letters a full queue refused (ErrFull), oldest first,
	// handed off again in that order by one attempt at a time (a timer,
	// no goroutine of its own); see keep.
	kept []keptLetter[T]
	// keptN is len(kept), read without the lock: the source takes no
	// new letters while it is not 0, and hands nothing off past them.
	keptN atomic.Int64
	// room is closed once kept empties; made when it fills.
	room chan struct{}
	// keptTimer arms the next attempt, keptBackoff is the wait before
	// it; episode counts the letters kept and attempts the failed
	// attempts since kept last filled, for the log line when it empties.
	keptTimer   *time.Timer
	keptBackoff time.Duration
	episode     int
	attempts    int
}

// handOffKind is what a kept letter's hand-off is.
type handOffKind uint8

const (
	handOffHold handOffKind = iota
	handOffRequeue
	handOffDeadLetter
)

// keptLetter is a letter a full queue refused, kept by its source.
type keptLetter[T any] struct {
	p    pendingLetter[T] // as received: settled once handed off, given back at Close
	l    Letter[T]        // what is handed off
	kind handOffKind
	hold int // the hold queue, for handOffHold
}

// initLocked makes hs's context with the first hand-off kept.
func (hs *handOffs[T]) initLocked() {
	if hs.ctx == nil {
		hs.ctx, hs.stop = context.WithCancel(context.Background())
	}
}

// handTo hands l off to the backend as kind says.
func (s *Source[T]) handTo(ctx context.Context, kind handOffKind, hold int, l Letter[T]) error {
	switch kind {
	case handOffHold:
		return s.q.Hold(ctx, hold, l)
	case handOffRequeue:
		return s.q.Requeue(ctx, l)
	default:
		return s.q.DeadLetter(ctx, l)
	}
}

// handOffName names kind for logs.
func (s *Source[T]) handOffName(kind handOffKind, hold int) string {
	switch kind {
	case handOffHold:
		return "hold " + s.t.holds[hold].Name
	case handOffRequeue:
		return "requeue"
	default:
		return "dead-letter to " + s.t.dlq
	}
}

// handedOff counts a hand-off of l the backend took: a dead letter under
// its reason, logged (a topology's source's; a dead source only puts its
// letters back) within the bounds of deadLog, so that the lines and their
// held-back counts add up to the dead letters counted.
func (s *Source[T]) handedOff(ctx context.Context, kind handOffKind, l *Letter[T]) {
	if kind != handOffDeadLetter {
		return
	}
	s.deadBy[deadReasonIndex(l.Death)].Add(1)
	if !s.dead && l.Death != nil {
		s.deadLog.Line(ctx, s.log, slog.String("reason", string(l.Death.Reason)), slog.String("key", l.Key),
			slog.Int("retries", l.Retries), slog.String("error", l.Death.Error), slog.String("dlq", s.t.dlq))
	}
}

// handOff hands l, p's letter as it goes to the backend, off, and settles
// p once the backend took it. A refusal for room (an error wrapping
// ErrFull) keeps p instead, to be handed off again once there is room (see
// keep), and so does any hand-off while letters so kept wait, so that none
// overtakes them (a key's dead letters keep their order). It returns nil
// when it is done with p (handed off and settled, or kept), the
// backend's error otherwise (p is then not settled).
func (s *Source[T]) handOff(ctx context.Context, p *pendingLetter[T], l Letter[T], kind handOffKind, hold int) error {
	if s.handOffs.keptN.Load() > 0 && s.keep(p, l, kind, hold, nil) {
		return nil
	}
	err := s.handTo(ctx, kind, hold, l)
	if err == nil {
		s.handedOff(ctx, kind, &l)
		s.done(ctx, p)
		return nil
	}
	if errors.Is(err, ErrFull) && s.keep(p, l, kind, hold, err) {
		return nil
	}
	return err
}

// keep adds p to the letters kept for room, refused with err (nil: not
// tried, because others wait), and arms their next attempt when it is
// the first: it logs one WARN line then, and one INFO line when the
// last of them is handed off (attemptKept), not one per attempt. The
// attempts go on for as long as the source runs, handOffFirstBackoff
// apart, doubling up to handOffMaxBackoff; each hands off as many kept
// letters as the backend takes, in order. It returns false, keeping
// nothing, once the source has closed, or when nothing is kept and p was
// not refused (the caller then tries p itself).
func (s *Source[T]) keep(p *pendingLetter[T], l Letter[T], kind handOffKind, hold int, err error) bool {
	hs := &s.handOffs
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.closed || (len(hs.kept) == 0 && err == nil) {
		return false
	}
	hs.initLocked()
	first := len(hs.kept) == 0 && hs.room == nil
	hs.kept = append(hs.kept, keptLetter[T]{p: *p, l: l, kind: kind, hold: hold})
	hs.keptN.Store(int64(len(hs.kept)))
	hs.episode++
	if first {
		hs.room = make(chan struct{})
		hs.episode, hs.attempts = 1, 0
		hs.keptBackoff = handOffFirstBackoff
		s.log.Warn(refusedLog, slog.String("hand_off", s.handOffName(kind, hold)),
			slog.Duration("next_attempt_in", hs.keptBackoff), slog.Any("error", err))
		hs.wg.Add(1)
		hs.keptTimer = time.AfterFunc(hs.keptBackoff, func() { defer hs.wg.Done(); s.attemptKept() })
	}
	return true
}

// attemptKept hands the kept letters off again, oldest first, until the
// backend refuses one (the next attempt is then armed, after twice the
// backoff, up to handOffMaxBackoff) or none is left (the source then
// takes new letters again).
func (s *Source[T]) attemptKept() {
	hs := &s.handOffs
	hs.mu.Lock()
	parent := hs.ctx
	hs.mu.Unlock()
	took := false
	for {
		hs.mu.Lock()
		if hs.closed || len(hs.kept) == 0 {
			hs.mu.Unlock()
			return
		}
		k := hs.kept[0]
		hs.mu.Unlock()
		ctx, cancel := context.WithTimeout(parent, handOffTimeout)
		err := s.attemptOnce(ctx, s.handOffName(k.kind, k.hold), func(ctx context.Context, l Letter[T]) error {
			return s.handTo(ctx, k.kind, k.hold, l)
		}, k.l, func() {
			cancel()
			s.keptRefused(took)
		})
		if err == nil {
			s.handedOff(ctx, k.kind, &k.l)
			s.doneAside(ctx, &k.p)
		}
		cancel()
		if err != nil {
			s.keptRefused(took)
			return
		}
		hs.mu.Lock()
		took = true
		hs.kept[0] = keptLetter[T]{}
		hs.kept = hs.kept[1:]
		hs.keptN.Store(int64(len(hs.kept)))
		if len(hs.kept) == 0 {
			hs.kept = nil
			close(hs.room)
			hs.room = nil
			s.log.Info(recoveredLog, slog.Int("letters", hs.episode), slog.Int("failed_attempts", hs.attempts))
			hs.mu.Unlock()
			return
		}
		hs.mu.Unlock()
	}
}

// keptRefused arms the next attempt at the kept letters after one the
// backend refused, unless the source has closed: soon if this attempt
// handed some off first (took: room came and went), otherwise after twice
// the wait, up to handOffMaxBackoff.
func (s *Source[T]) keptRefused(took bool) {
	hs := &s.handOffs
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.attempts++
	if hs.closed {
		return
	}
	hs.keptBackoff = min(2*hs.keptBackoff, handOffMaxBackoff)
	if took {
		hs.keptBackoff = handOffFirstBackoff
	}
	hs.wg.Add(1)
	hs.keptTimer = time.AfterFunc(hs.keptBackoff, func() { defer hs.wg.Done(); s.attemptKept() })
}

// handOffExited is the message a hand-off attempt whose backend call ended
// the goroutine (runtime.Goexit) is logged with, with the stack of the
// exit; the attempt counts as failed and the letter is tried again.
const handOffExited = "a hand-off to the backend ended its goroutine (runtime.Goexit); the letter is tried again"

// attemptOnce makes one of the source's own attempts to hand l off with
// do, on a timer's goroutine, and returns do's error, a panic in do as an
// error wrapping the *message.PanicError. When do ends the goroutine
// instead (runtime.Goexit, as t.FailNow does), the exit is logged at
// error level with the stack, naming what (the hand-off), and exited is
// called as the goroutine ends: it treats the attempt as failed, so that
// the letter is neither lost nor left waiting for an attempt that never
// comes.
func (s *Source[T]) attemptOnce(ctx context.Context, what string, do func(context.Context, Letter[T]) error, l Letter[T], exited func()) (err error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if v := recover(); v != nil {
			err = &message.PanicError{Value: v, Stack: debug.Stack()}
			return
		}
		s.log.Error(handOffExited, slog.String("to", what), slog.String("key", l.Key),
			slog.Any("error", message.ErrHandlerExited), slog.String("stack", string(debug.Stack())))
		exited()
	}()
	err = do(ctx, l)
	returned = true
	return err
}

// settleExited is the message a Settle that ended the goroutine
// (runtime.Goexit) on one of the source's own attempts is logged with,
// with the stack of the exit.
const settleExited = "a settle ended its goroutine (runtime.Goexit); the letter counts as not settled"

// doneAside is done on one of the source's own attempts (a timer's
// goroutine): a Settle that ends the goroutine (runtime.Goexit, as
// t.FailNow does) ends only a goroutine of its own, is logged at error
// level with the stack, and counts as a settle that failed with
// message.ErrHandlerExited, so that the attempt goes on (the letters kept
// behind it are handed off). It costs a goroutine per letter so settled,
// only for letters whose hand-off failed.
func (s *Source[T]) doneAside(ctx context.Context, p *pendingLetter[T]) {
	err := panics.Isolate(func() error { return settleOn(ctx, p.r.rd, &p.l) }, func(stack []byte) error {
		s.log.Error(settleExited, slog.String("key", p.l.Key), slog.Any("error", message.ErrHandlerExited), slog.String("stack", string(stack)))
		return message.ErrHandlerExited
	})
	s.settled(ctx, p, err)
}

// roomWait returns a channel closed once no letter is kept for room, or,
// when none is, once fewer than the limit of letters are kept to be
// handed off again (retryHandOff); nil when the source may take letters
// (without locking then).
func (hs *handOffs[T]) roomWait() <-chan struct{} {
	if hs.keptN.Load() == 0 && !hs.retryFull.Load() {
		return nil
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.room != nil {
		return hs.room
	}
	return hs.retryRoom
}

// retryHandOff keeps p, whose hand-off of l as kind says just failed with
// err, and tries again after a backoff: it counts p's letter in
// Stats.HandOffFailed (and a dead-lettering's in DeadLetterFailed), once
// for this delivery of it. It returns false, keeping and counting
// nothing, once the source has closed.
func (s *Source[T]) retryHandOff(p *pendingLetter[T], l Letter[T], kind handOffKind, hold int, err error) bool {
	h := &handOff[T]{p: *p, l: l, kind: kind, hold: hold, backoff: handOffFirstBackoff, failed: 1,
		chained: kind == handOffDeadLetter && s.seq != nil && l.Death != nil && l.Death.Reason == ReasonPoisoned}
	hs := &s.handOffs
	if !s.schedule(h, err) {
		return false
	}
	s.handOffFails.Add(1)
	if kind == handOffDeadLetter {
		s.deadLetterFails.Add(1)
	}
	hs.mu.Lock()
	hs.countKeptLocked()
	hs.mu.Unlock()
	return true
}

// countKeptLocked counts a letter kept to be handed off again; at the
// limit the source takes no new letters. hs.mu is held.
func (hs *handOffs[T]) countKeptLocked() {
	hs.retries++
	if hs.retries >= hs.retryLimit && hs.retryRoom == nil {
		hs.retryRoom = make(chan struct{})
		hs.retryFull.Store(true)
	}
}

// followKept keeps p, whose letter l is a dead-lettering of a poisoned
// key, behind the key's dead-lettering kept (see handOffs.chains), when
// there is one and the source is open, and reports whether it did.
func (s *Source[T]) followKept(p *pendingLetter[T], l Letter[T]) bool {
	hs := &s.handOffs
	if hs.chainsN.Load() == 0 {
		return false
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	f, ok := hs.chains[l.Key]
	if !ok || hs.closed {
		return false
	}
	hs.chains[l.Key] = append(f, &handOff[T]{p: *p, l: l, kind: handOffDeadLetter, chained: true})
	hs.countKeptLocked()
	return true
}

// handOffFollowers hands off, in order, the dead-letterings of poisoned
// key kept behind the one the backend just took, until it fails one: that
// one is then kept, the others still behind it. Once the source has
// closed, they are left to Close to give back, in order.
func (s *Source[T]) handOffFollowers(key string) {
	hs := &s.handOffs
	for {
		hs.mu.Lock()
		f := hs.chains[key]
		if len(f) == 0 || hs.closed {
			hs.backChainLocked(key)
			hs.mu.Unlock()
			return
		}
		h := f[0]
		f[0] = nil
		hs.chains[key] = f[1:]
		hs.mu.Unlock()
		if !s.attemptHandOff(h) {
			return
		}
	}
}

// backChainLocked moves the dead-letterings kept behind key's to back, in
// order, and forgets key's chain. hs.mu is held.
func (hs *handOffs[T]) backChainLocked(key string) {
	for _, h := range hs.chains[key] {
		hs.back = append(hs.back, h.p.l)
	}
	delete(hs.chains, key)
	hs.chainsN.Store(int64(len(hs.chains)))
}

// keptForRetry returns the number of letters kept to be handed off again
// (retryHandOff).
func (hs *handOffs[T]) keptForRetry() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.retries
}

// retried counts a kept letter the backend took at last, and makes room
// for new letters below the limit.
func (hs *handOffs[T]) retried() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.retries--
	if hs.retries < hs.retryLimit {
		hs.openRetryRoomLocked()
	}
}

// openRetryRoomLocked lets the source take new letters again.
func (hs *handOffs[T]) openRetryRoomLocked() {
	if hs.retryRoom != nil {
		close(hs.retryRoom)
		hs.retryRoom = nil
		hs.retryFull.Store(false)
	}
}

// schedule queues h's next attempt, after h's failed one, and logs that
// failure within the bounds of refusedHoldLog when it makes a power of two
// of h's failed attempts (see handOffs); false once closed. The line is
// logged under hs.mu, so that Close, which flushes refusedHoldLog once
// hs is closed, counts it.
func (s *Source[T]) schedule(h *handOff[T], err error) bool {
	hs := &s.handOffs
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.closed {
		return false
	}
	hs.initLocked()
	if h.chained {
		if _, ok := hs.chains[h.l.Key]; !ok {
			if hs.chains == nil {
				hs.chains = map[string][]*handOff[T]{}
			}
			hs.chains[h.l.Key] = nil
			hs.chainsN.Store(int64(len(hs.chains)))
		}
	}
	if h.failed&(h.failed-1) == 0 {
		s.refusedHoldLog.Line(context.Background(), s.log, slog.String("to", s.handOffName(h.kind, h.hold)), slog.String("key", h.p.l.Key),
			slog.Int("failed_attempts", h.failed), slog.Duration("in", h.backoff), slog.Any("error", err))
	}
	h.due = time.Now().Add(h.backoff)
	heap.Push(&hs.waiting, h)
	hs.armLocked(s.attemptDue)
	return true
}

// armLocked arms the retry timer for the earliest hand-off waiting, unless
// it is armed for one as early, its attempts are being made, or hs has
// closed; hs.mu is held.
func (hs *handOffs[T]) armLocked(attempt func()) {
	if hs.closed || hs.retrying || len(hs.waiting) == 0 {
		return
	}
	due := hs.waiting[0].due
	if !hs.retryAt.IsZero() {
		if !due.Before(hs.retryAt) || !hs.retryTimer.Stop() {
			return // armed as early, or firing: attemptDue takes it
		}
		hs.wg.Done()
	}
	hs.retryAt = due
	hs.wg.Add(1)
	hs.retryTimer = time.AfterFunc(time.Until(due), func() { defer hs.wg.Done(); attempt() })
}

// attemptDue makes the attempts due, one at a time, earliest first, then
// arms the retry timer for the next; it does so too when an attempt ends
// its goroutine (runtime.Goexit).
func (s *Source[T]) attemptDue() {
	hs := &s.handOffs
	hs.mu.Lock()
	hs.retryAt, hs.retrying = time.Time{}, true
	hs.mu.Unlock()
	defer func() {
		hs.mu.Lock()
		hs.retrying = false
		hs.armLocked(s.attemptDue)
		hs.mu.Unlock()
	}()
	for {
		hs.mu.Lock()
		if hs.closed || len(hs.waiting) == 0 || hs.waiting[0].due.After(time.Now()) {
			hs.mu.Unlock()
			return
		}
		h := heap.Pop(&hs.waiting).(*handOff[T])
		hs.mu.Unlock()
		if s.attemptHandOff(h) && h.chained {
			s.handOffFollowers(h.l.Key)
		}
	}
}

// attemptHandOff hands h's letter off again: settled once the backend takes
// it; otherwise tried again later, or, after Close, given back by Close.
// It reports whether the backend took it.
func (s *Source[T]) attemptHandOff(h *handOff[T]) bool {
	hs := &s.handOffs
	hs.mu.Lock()
	parent := hs.ctx
	hs.mu.Unlock()
	ctx, cancel := context.WithTimeout(parent, handOffTimeout)
	defer cancel()
	what := s.handOffName(h.kind, h.hold)
	err := s.attemptOnce(ctx, what, func(ctx context.Context, l Letter[T]) error {
		return s.handTo(ctx, h.kind, h.hold, l)
	}, h.l, func() { s.retryFailed(h, message.ErrHandlerExited) })
	if err == nil {
		if h.failed > 0 {
			s.retriedHoldLog.Line(ctx, s.log, slog.String("to", what), slog.String("key", h.p.l.Key), slog.Int("failed_attempts", h.failed))
		}
		s.handedOff(ctx, h.kind, &h.l)
		s.doneAside(ctx, &h.p)
		hs.retried()
		return true
	}
	s.retryFailed(h, err)
	return false
}

// retryFailed arms the next attempt at h, whose attempt just failed with
// err, or, once the source has closed, leaves h's letter to Close to give
// back, with the dead-letterings kept behind it (chained) after it. A
// letter kept behind another, whose first attempt this is, counts in
// HandOffFailed and DeadLetterFailed then.
func (s *Source[T]) retryFailed(h *handOff[T], err error) {
	hs := &s.handOffs
	if h.failed == 0 {
		s.handOffFails.Add(1)
		s.deadLetterFails.Add(1)
		h.backoff = handOffFirstBackoff
	} else {
		h.backoff = min(2*h.backoff, handOffMaxBackoff)
	}
	h.failed++
	if !s.schedule(h, err) {
		hs.mu.Lock()
		hs.back = append(hs.back, h.p.l)
		if h.chained {
			hs.backChainLocked(h.l.Key)
		}
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
	if !hs.retryAt.IsZero() && hs.retryTimer.Stop() {
		hs.wg.Done()
	}
	// An attempt under way puts its letter in back; the others wait,
	// each poisoned key's dead-letterings kept behind one after it.
	for _, h := range hs.waiting {
		out = append(out, h.p.l)
		if h.chained {
			for _, f := range hs.chains[h.l.Key] {
				out = append(out, f.p.l)
			}
			delete(hs.chains, h.l.Key)
		}
	}
	hs.chainsN.Store(int64(len(hs.chains)))
	clear(hs.waiting)
	hs.waiting = nil
	if hs.keptTimer != nil && hs.keptTimer.Stop() {
		hs.wg.Done()
	}
	hs.mu.Unlock()
	hs.wg.Wait()
	hs.mu.Lock()
	out = append(out, hs.back...)
	hs.back = nil
	// The letters kept for room go back as they were received.
	for i := range hs.kept {
		out = append(out, hs.kept[i].p.l)
	}
	hs.kept = nil
	hs.keptN.Store(0)
	if hs.room != nil {
		close(hs.room)
		hs.room = nil
	}
	hs.retries = 0
	hs.openRetryRoomLocked()
	hs.mu.Unlock()
	return out
}

// The lines a source logs, within the bounds of refusedHoldLog and
// retriedHoldLog, when the backend fails the hand-off of a letter it
// keeps (see retryHandOff), at the letter's first failed attempt and each
// doubling of them (ERROR), and when it takes the letter at last (INFO).
const (
	refusedHoldLog = "could not hand a letter to the backend; the source keeps it and tries again"
	retriedHoldLog = "handed a letter to the backend after failed attempts"
)

// The lines a source logs when a full queue starts refusing its hand-offs
// (WARN: nothing is lost, the source slows down) and once the letters it
// kept are all handed off (INFO).
const (
	refusedLog   = "a full queue refused a letter; the source keeps it, hands it off again once there is room, and takes no new letters meanwhile"
	recoveredLog = "the letters a full queue refused are all handed off; the source takes new letters again"
)
