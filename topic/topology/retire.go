package topology

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/internal/liveset"
)

// A run that fails (its reader's Receive returned an error, or it
// panicked) is run again by its producer stage, which subscribes a new
// reader. The failed run's reader is retired rather than closed: the
// letters it handed out may still be in the pipeline, or kept for a
// hand-off, and their outcomes are settled through it (a durable backend
// commits them there), so it stays open, receiving nothing more, until
// the last of them is settled, and is then closed on the closer, a
// goroutine of the source's own, within
// retiredCloseTimeout; the source's Close closes the retired readers that
// still have letters out with the others, and waits for the closer within
// its context. The letters of it a sequenced source holds back behind
// their key are not waited for: they go back to the backend as the reader
// is retired (giveBack). A reader a run left for another reason (its
// context ended: the pipeline stops; its queues closed) is closed by
// Close.

// retiredCloseTimeout bounds the closer's closing of one retired reader.
// A durable backend's reader whose closing it cuts short goes on closing
// within the backend's own bounds (Reader.Close).
const retiredCloseTimeout = 30 * time.Second

// heldReader is a reader the source subscribed, with the count of the
// letters it received that the source has not settled yet.
type heldReader[T any] struct {
	rd Reader[T]
	// out counts the letters received from rd and not yet settled: Run
	// adds them as it receives them, done counts each off as it settles
	// it. Letters given back (Queues.Return) at Close stay counted.
	out atomic.Int64
	// retired is set once the run reading from rd failed: nothing
	// receives from rd any more, and it is closed once out is 0.
	retired atomic.Bool
	// gone are the routing shards rd, a ShardNotifier of a sequenced
	// source, let go of since its last assignment, or that its last
	// assignment left out: the letters of them taken from rd while it
	// told so are given back as they are admitted (see sequencer.admit).
	// Empty for a reader that tells nothing. Guarded by the sequencer's
	// mu, as are tells and taking.
	gone shardSet
	// tells counts what rd told of its shards; taking is tells as the
	// run last began to take letters from rd (sequencer.taking). A
	// letter taken after rd told its shard let go is handed out by a
	// part rd holds (a partition that holds letters of a shard the
	// partition count now routes elsewhere): it is admitted, not given
	// back, which would keep it from being handled anywhere.
	tells, taking uint64
	// parts is rd as a PartTracker, set (before rd tells anything) when
	// rd is also the ShardNotifier of a sequenced source: the letters
	// it let go of are known by their part, not by their shard (see
	// heldReader.letGo).
	parts PartTracker
}

// retiredCloseFailedLog is the message of the line the closer logs for a
// retired reader whose closing failed.
const retiredCloseFailedLog = "closing the reader of a failed run failed"

// retiredReader is a retired reader dropped from Source.readers, queued
// for the closer, with what it counted as it was dropped (countGone), and
// its closing's error once it is closed.
type retiredReader[T any] struct {
	h       *heldReader[T]
	counted readerCounts
	err     error
}

// retire marks h, whose run failed, retired, gives back to the backend
// the letters of it a sequenced source holds back (giveBack), and drops h
// at once when no letter of it is out.
func (s *Source[T]) retire(ctx context.Context, h *heldReader[T]) {
	h.retired.Store(true)
	s.giveBack(ctx, h)
	if h.out.Load() == 0 {
		s.mu.Lock()
		s.dropLocked(h)
		s.mu.Unlock()
	}
}

// giveBack returns to the backend (Queues.Return) the letters a sequenced
// source holds back that h, retired, handed out, and counts them off.
// Nothing receives from h any more, and a broker backend keeps sending
// to it the messages of the share of the group it holds (a Key_Shared
// consumer's keys, a Kafka member's partitions) until it closes: a
// letter held back there may wait for ever on an earlier letter of its
// key that comes back, retried, among them. Given back, they no longer
// keep h open, and once its letters in the pipeline are settled and it
// is closed the broker delivers them again to the next reader, ahead of
// the letters of their keys that came after them; their keys keep their
// message in flight, so they wait behind it again.
func (s *Source[T]) giveBack(ctx context.Context, h *heldReader[T]) {
	if s.seq == nil {
		return
	}
	s.returnHeld(ctx, s.seq.giveBack(h), giveBackFailedLog)
}

// shardsChanged is what h, a sequenced run's reader and a ShardNotifier,
// tells of its shards: the letters held back of those it lets go of, or
// of those its new assignment leaves out, go back to the backend, and
// so do the letters of them taken from h that the run admits later (see
// sequencer.letGo and sequencer.assigned). in is called only before
// shardsChanged returns.
func (s *Source[T]) shardsChanged(ctx context.Context, h *heldReader[T], change ShardChange, in func(shard int) bool) {
	var ps []pendingLetter[T]
	switch change {
	case ShardsReleased:
		ps = s.seq.letGo(h, in)
	case ShardsAssigned:
		ps = s.seq.assigned(h, in)
	}
	s.returnHeld(ctx, ps, shardGiveBackFailedLog)
}

// returnHeld gives ps, letters the sequencer held back, back to the
// backend (Queues.Return), logging failLog at ERROR when it refuses
// them, and counts them off their readers.
func (s *Source[T]) returnHeld(ctx context.Context, ps []pendingLetter[T], failLog string) {
	if len(ps) == 0 {
		return
	}
	ls := make([]Letter[T], len(ps))
	for i := range ps {
		ls[i] = ps[i].l
	}
	if err := s.q.Return(ctx, ls); err != nil {
		s.log.ErrorContext(ctx, failLog, slog.Int("letters", len(ls)), slog.Any("error", err))
	}
	for i := range ps {
		s.settledOne(ps[i].r)
	}
}

// giveBackFailedLog is the message of the line giveBack logs when the
// backend refuses the letters it gives back.
const giveBackFailedLog = "could not give back the held-back letters of a failed run; a durable backend delivers them again, the in-memory one has lost them"

// shardGiveBackFailedLog is the message of the line shardsChanged, or
// a run admitting letters of shards its reader let go of, logs when the
// backend refuses the letters it gives back.
const shardGiveBackFailedLog = "could not give back the letters of shards the reader let go of; a durable backend delivers them again"

// settledOne counts off one letter of h, settled or given back, and drops
// h when it is retired and that was its last letter out.
func (s *Source[T]) settledOne(h *heldReader[T]) {
	if h.out.Add(-1) == 0 && h.retired.Load() {
		s.mu.Lock()
		s.dropLocked(h)
		s.mu.Unlock()
	}
}

// dropLocked removes h, retired with no letter out, from s.readers and,
// if it was there, queues it for the closer (s.retiring); s.mu is held.
// Closing a reader can wait on the broker (a Kafka reader commits and
// leaves its group), so neither the run that retired it nor the outcome
// of its last letter waits for that. A reader Close took is no longer in
// s.readers: no closer starts once Close waits for it.
func (s *Source[T]) dropLocked(h *heldReader[T]) {
	i := slices.Index(s.readers, h)
	if i < 0 {
		return
	}
	s.readers = slices.Delete(s.readers, i, i+1)
	s.retiring.Add(&retiredReader[T]{h: h, counted: s.countGone(h.rd)})
}

// closeRetired closes retired readers, each within retiredCloseTimeout,
// all at once (the closer's close). A closing that fails is logged,
// unless Close cut it short (it then reports it).
func (s *Source[T]) closeRetired(batch []*retiredReader[T]) {
	_ = liveset.CloseEach(batch, func(rr *retiredReader[T]) error {
		ctx, cancel := context.WithTimeout(s.closerCtx, retiredCloseTimeout)
		defer cancel()
		rr.err = closeReader(ctx, rr.h.rd)
		return nil
	})
	cut := 0
	for _, rr := range batch {
		s.countClosed(rr.h.rd, rr.counted)
		switch {
		case rr.err == nil:
		case s.closerCtx.Err() != nil:
			cut++
		default:
			s.log.Warn(retiredCloseFailedLog, slog.Any("error", rr.err))
		}
	}
	if cut > 0 {
		s.mu.Lock()
		s.closerCut += cut
		s.mu.Unlock()
	}
}
