package topology

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/validate"
)

// HandleDead adapts a handler of dead letters to a processor handler for a
// pipeline over a source made by NewDeadSource: h sees the payload and its
// death metadata. A message that does not come from a dead source fails
// with ErrNotDead.
func HandleDead[T, Out any](h func(ctx context.Context, v T, d Death) (Out, error)) func(context.Context, *message.Message[T]) (Out, error) {
	return func(ctx context.Context, m *message.Message[T]) (Out, error) {
		md, ok := DeliveryOf(m)
		if !ok || md.Death == nil {
			var zero Out
			return zero, ErrNotDead
		}
		return h(ctx, m.Data, *md.Death)
	}
}

// ErrNotDead fails a message given to a HandleDead handler that carries no
// death metadata.
var ErrNotDead = errors.New("topology: not a dead letter")

// DefaultReplayListed is the default ReplayOptions.MaxListed.
const DefaultReplayListed = 4096

// MaxReplayListed is the largest ReplayOptions.MaxListed.
const MaxReplayListed = 1 << 20

// ReplayOptions say which dead letters Replay puts back.
type ReplayOptions[T any] struct {
	// Filter selects the dead letters to replay; nil selects all of them.
	// Letters whose Death.Topic is not the topology's main topic, or
	// whose Death.Group is another consumer group (a DLQ shared through
	// DLQNamed), are never replayed here, nor given to Filter. A Filter that
	// panics stops Replay as a queue error does: the letter it was given
	// and those after it stay in the DLQ, and Replay returns an error
	// wrapping the *message.PanicError. A Filter that ends its goroutine
	// (runtime.Goexit, as t.FailNow does) ends Replay's, which never
	// returns, and likewise leaves that letter and those after it in the
	// DLQ.
	Filter func(l *Letter[T]) bool
	// DryRun reports what would be replayed and leaves every letter in the
	// DLQ: each letter is put back on the DLQ as it is read. With a DLQ
	// reader that pins its end (EndPinner: the in-memory, Kafka and
	// Pulsar backends') a dry run holds one chunk of letters and the
	// letters the report lists (MaxListed), not the DLQ; with another
	// reader it holds the whole DLQ, as every Replay does.
	DryRun bool
	// MaxListed is how many of the letters replayed (selected, on a dry
	// run) ReplayReport.Replayed lists: the first ones, in order; the
	// report's ReplayedCount counts them all. It bounds the memory the
	// report holds whatever the DLQ's size. -1 lists none; 0 means
	// DefaultReplayListed (4096); at most MaxReplayListed.
	MaxListed int `validate:"gte=-1,lte=1048576"`
}

// WithDefaults returns o with a zero MaxListed replaced by its default.
// The zero value replays every letter for real.
func (o ReplayOptions[T]) WithDefaults() ReplayOptions[T] {
	if o.MaxListed == 0 {
		o.MaxListed = DefaultReplayListed
	}
	return o
}

// Validate checks o (after WithDefaults) and returns nil or a
// validate.Errors naming every broken rule ("replay.maxListed must be
// ≤ 1048576").
func (o ReplayOptions[T]) Validate() error { return validate.Struct("replay", &o) }

// ReplayReport is what Replay did (or, on a dry run, would have done).
type ReplayReport[T any] struct {
	// Replayed are the first letters put back on the main topic (as they
	// were in the DLQ, Death included), in order: at most
	// ReplayOptions.MaxListed of them. On a dry run, the first letters
	// Replay would have put back.
	Replayed []Letter[T]
	// ReplayedCount is the number of letters put back on the main topic
	// (on a dry run, that would have been), whether Replayed lists them
	// or not.
	ReplayedCount int
	// Kept is the number of letters left in the DLQ, those given back
	// after a failure included.
	Kept int
	// Undecodable is the number of messages of the DLQ that Replay's
	// reader skipped for good because they could not be decoded, logged
	// at WARN by the backend, a burst in a few lines (see
	// UndecodableCounter): a durable backend's only. They are neither replayed nor kept.
	Undecodable uint64
}

// replayed counts l as replayed, and lists it while fewer than max are.
func (rep *ReplayReport[T]) replayed(l *Letter[T], max int) {
	rep.ReplayedCount++
	if len(rep.Replayed) < max {
		rep.Replayed = append(rep.Replayed, *l)
	}
}

// Replay takes every letter the DLQ of q holds now, puts those the filter
// selects back to q's consumer group on the main topic, with their retry
// count, failure times and death cleared (their key, shard and Headers
// kept), and returns the others to the
// DLQ (all of them on a dry run). Letters that reach the DLQ while it runs
// may be looked at or not. The replayed letters go to the topology's own
// consumer group only: other groups of the topic never failed them. Only
// the letters this topology's topic and group dead-lettered are offered
// to the filter and replayed: in a DLQ that topologies share (DLQNamed),
// those of another topic, or of another consumer group of the same topic
// (Death.Group), stay in the DLQ, counted as kept; a letter whose
// Death.Group is empty (written by something other than a topology
// source) is taken as the group's. A
// message of the DLQ that a durable backend's reader cannot decode is
// skipped for good by the backend, neither replayed nor kept, and counted
// in the report (ReplayReport.Undecodable).
//
// When the DLQ's reader can pin its end (EndPinner: the in-memory, Kafka
// and Pulsar backends' can), Replay pins it to what the DLQ holds as it
// starts and reads those letters a chunk at a time, handling each as it
// is read: a letter it replays is requeued and settled, a letter it keeps
// is put back on the DLQ (past the pinned end) and settled. It holds one
// chunk and the letters the report lists, not the DLQ, whatever it keeps,
// and it settles the letters in the order it read them, so that a
// durable backend commits every letter it handled (a Replay that dies
// midway leaves to the DLQ's next reader the letters it had not handled
// and those it settled since the backend's last commit); neither the letters it puts back nor those that reach the
// DLQ while it runs (a replayed letter that fails again among them) are
// read. With another reader it reads the DLQ to its end before it
// handles a letter, holding all of it. The report lists at most
// ReplayOptions.MaxListed letters.
//
// Replay is meant for an operator, with the topology's consumers running or
// not; it reads the DLQ as one more consumer, so it must not run while a
// dead source consumes the same DLQ. It stops at the first queue error,
// returning what it did so far, and loses no letter it took: one it can
// neither replay nor put back on the DLQ (DeadLetter failed: the DLQ is
// full, say) is given back to the DLQ (Queues.Return: the in-memory
// backend puts it back at the DLQ's head, a durable one leaves it
// unsettled, for the DLQ to deliver again), and the failure is returned.
// It reads the DLQ with TryReceive within ctx, so a backend that asks its
// broker whether the DLQ has more (see Reader.TryReceive) stops asking by
// ctx's deadline. Its DLQ reader is closed within ctx (a durable backend
// commits then what Replay settled): when ctx ends first,
// Replay returns an error wrapping ctx.Err(), and the letters it took from
// the DLQ may be delivered from it again. A nil q, or one whose Topology
// returns nil, is a validate.FieldError ("replay.queues is required",
// "replay.queues has no topology"). A nil ctx returns ErrNilContext,
// nothing taken from the DLQ.
func Replay[T any](ctx context.Context, q Queues[T], opts ReplayOptions[T]) (rep ReplayReport[T], err error) {
	if ctx == nil {
		return rep, ErrNilContext
	}
	if err := checkQueues("replay.queues", q); err != nil {
		return rep, err
	}
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return rep, err
	}
	t := q.Topology()
	r, err := q.SubscribeDead(ctx)
	if err != nil {
		return rep, err
	}
	defer func() {
		if cerr := r.Close(ctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("topology %s: replay: closing the DLQ reader: %w", t.name, cerr))
		}
		rep.Undecodable = undecodable(r)
	}()
	// The DLQ is read a chunk at a time, and each letter is handled as it
	// is read: a letter replayed is requeued and settled, a letter kept
	// is put back on the DLQ and settled. A reader whose end is pinned
	// (EndPinner) delivers only the letters the DLQ held when Replay
	// started, so it never meets a letter put back, nor those that reach
	// the DLQ while Replay runs, among them those it replayed that failed
	// again. Another reader is read to its end (into pending) before any
	// letter is handled, since it would deliver those letters again.
	buf := make([]Letter[T], 64)
	var chunk []Letter[T]
	// filtering is the index in chunk of the letter Filter is called on,
	// -1 between calls. A Filter that ends the goroutine
	// (runtime.Goexit, as t.FailNow does) leaves it set: the letters of
	// the chunk from that one on go back to the DLQ as they do after a
	// Filter that panics, before the DLQ reader closes.
	filtering := -1
	defer func() {
		if filtering >= 0 {
			_ = keepDead(ctx, q, r, chunk[filtering:], nil, &rep)
		}
	}()
	pinned := false
	if p, ok := r.(EndPinner); ok {
		if err := p.PinEnd(ctx); err != nil {
			return rep, fmt.Errorf("topology %s: replay: pinning the DLQ reader's end: %w", t.name, err)
		}
		pinned = true
	}
	var pending []Letter[T]
	for done := false; !done; {
		n, err := r.TryReceive(ctx, buf)
		if err != nil {
			if len(pending) > 0 {
				err = errors.Join(err, giveBack(ctx, q, pending, &rep))
			}
			return rep, err
		}
		switch {
		case n == 0:
			done, chunk = true, pending
		case !pinned:
			pending = append(pending, buf[:n]...)
			continue
		default:
			chunk = buf[:n]
		}
		for i := range chunk {
			l := &chunk[i]
			pick := l.Death != nil && l.Death.Topic == t.name && ownDeath(t, l.Death)
			if pick && opts.Filter != nil {
				var ferr error
				filtering = i
				pick, ferr = filter(opts.Filter, l)
				filtering = -1
				if ferr != nil {
					ferr = fmt.Errorf("topology %s: replay: Filter: %w", t.name, ferr)
					return rep, errors.Join(ferr, keepDead(ctx, q, r, chunk[i:], nil, &rep))
				}
			}
			if !pick || opts.DryRun {
				if pick {
					rep.replayed(l, opts.MaxListed)
				}
				if err := q.DeadLetter(ctx, *l); err != nil {
					err = fmt.Errorf("topology %s: replay: keep a dead letter: %w", t.name, err)
					return rep, errors.Join(err, keepDead(ctx, q, r, chunk[i+1:], chunk[i:i+1], &rep))
				}
				rep.Kept++
				if err := r.Settle(ctx, l); err != nil {
					return rep, errors.Join(err, keepDead(ctx, q, r, chunk[i+1:], nil, &rep))
				}
				continue
			}
			fresh := Letter[T]{Value: l.Value, Key: l.Key, Shard: l.Shard, Headers: l.Headers}
			if err := q.Requeue(ctx, fresh); err != nil {
				// The letters taken and not yet handled go back to the
				// DLQ: a backend that removes a letter when it is
				// received (the in-memory one) would lose them.
				err = fmt.Errorf("topology %s: replay: %w", t.name, err)
				return rep, errors.Join(err, keepDead(ctx, q, r, chunk[i:], nil, &rep))
			}
			rep.replayed(l, opts.MaxListed)
			if err := r.Settle(ctx, l); err != nil {
				return rep, errors.Join(err, keepDead(ctx, q, r, chunk[i+1:], nil, &rep))
			}
		}
		clear(chunk)
		chunk = nil
	}
	return rep, nil
}

// filter calls f on l and returns a panic in it as a *message.PanicError.
func filter[T any](f func(l *Letter[T]) bool, l *Letter[T]) (pick bool, err error) {
	defer message.Recover(&err)
	return f(l), nil
}

// keepDead puts ls back on the DLQ and settles them, going on past
// failures; back are letters already refused by the DLQ. The letters the
// DLQ refuses are given back (giveBack) after the others, in order. It
// returns what failed.
func keepDead[T any](ctx context.Context, q Queues[T], r Reader[T], ls, back []Letter[T], rep *ReplayReport[T]) error {
	var errs []error
	back = slices.Clip(back)
	for i := range ls {
		if err := q.DeadLetter(ctx, ls[i]); err != nil {
			errs = append(errs, fmt.Errorf("topology %s: replay: keep a dead letter: %w", q.Topology().name, err))
			back = append(back, ls[i])
			continue
		}
		rep.Kept++
		if err := r.Settle(ctx, &ls[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(back) > 0 {
		errs = append(errs, giveBack(ctx, q, back, rep))
	}
	return errors.Join(errs...)
}

// giveBack gives ls, taken from the DLQ and neither replayed nor put back
// on it, back to the queue they came from (Queues.Return), unsettled, so
// that none is lost: the in-memory backend, which removed them from its
// DLQ when Replay received them, puts them back at its head; a durable
// one leaves them unsettled, for the DLQ to deliver again. They count as
// kept once the backend took them.
func giveBack[T any](ctx context.Context, q Queues[T], ls []Letter[T], rep *ReplayReport[T]) error {
	if err := q.Return(ctx, ls); err != nil {
		return fmt.Errorf("topology %s: replay: giving back %d dead letters: %w", q.Topology().name, len(ls), err)
	}
	rep.Kept += len(ls)
	return nil
}

// ownDeath reports whether d, the death of a letter of t's main topic,
// is one t's consumer group dealt: a DLQ shared by several groups of the
// topic (DLQNamed) holds each group's dead letters, and one group's
// replay must not hand it another's. A death that names no group is
// taken as t's.
func ownDeath(t *Topology, d *Death) bool {
	return d.Group == "" || d.Group == t.ConsumerGroup()
}
