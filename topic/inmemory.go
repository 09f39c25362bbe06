package topic

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/internal/queue"
)

// InMemory is the built-in backend: bounded in-process queues for balanced
// groups (each group is a queue) and a bounded ring for broadcast. It
// supports every mode and policy. A message's headers travel in its
// envelope: every recipient receives the publisher's map itself, with no
// copy. The zero value is ready to use.
type InMemory[T any] struct{}

// Name returns "in_memory".
func (InMemory[T]) Name() string { return "in_memory" }

// Capabilities returns every mode and policy, and the features of bounded
// in-process queues (not [FeatureDurable]).
func (InMemory[T]) Capabilities() Capabilities {
	return Capabilities{
		Modes:       []Mode{BalancedOnly, BroadcastOnly, Mixed},
		OnFull:      []OnFull{Block, DropNewest},
		OnLag:       []OnLag{DropOldest, Disconnect},
		AckModes:    []AckMode{AckFirst, AckAll},
		Propagation: []PropagationMode{PropagationDisabled, PropagationAuto},
		Features:    []Feature{FeatureGroupBackpressure, FeatureBroadcastCapacity},
	}
}

// NewTopic returns the state of one in-memory topic.
func (InMemory[T]) NewTopic(_ context.Context, _ Name, opts Options) (State[T], error) {
	t := &memTopic[T]{opts: opts, groups: make(map[GroupName]*memGroup[T])}
	if opts.Mode != BalancedOnly {
		t.ring = newRing[T](opts.Broadcast.Capacity, opts.Broadcast.OnLag)
	}
	return t, nil
}

// memEnv is a message as the in-memory queues and ring hold it: an
// Envelope without Lagged, since lag notices are never queued (the ring
// makes them when a subscriber receives). One word smaller than an
// Envelope (32 bytes for a word-sized T), it makes the hand-off between a
// publisher and its receivers markedly faster (BenchmarkTopicHop's
// balanced/batch runs close to twice as fast as with whole envelopes
// queued).
type memEnv[T any] struct {
	id      MessageID
	value   T
	ticket  *Ticket
	headers Headers
}

// memEnvOf is e as a queue holds it.
func memEnvOf[T any](e *Envelope[T]) memEnv[T] {
	return memEnv[T]{id: e.ID, value: e.Value, ticket: e.Ticket, headers: e.Headers}
}

// envelope is m as a subscriber receives it.
func (m *memEnv[T]) envelope() Envelope[T] {
	return Envelope[T]{ID: m.id, Value: m.value, Ticket: m.ticket, Headers: m.headers}
}

// memGroup is one balanced consumer group: a Queue shared by its members.
type memGroup[T any] struct {
	name    GroupName
	q       *queue.Queue[memEnv[T]]
	members int // guarded by memTopic.mu
}

// memTopic is the in-memory State.
//
// Balanced-only topics publish straight into the one group's queue (no
// topic lock). Mixed topics serialise publishes under mu, which makes a
// publish all-or-nothing: only mu holders add to group queues (publishers,
// and a closing member putting messages back), so room seen under mu stays
// there until the publish has put the message into every group and the
// ring. A publish that finds a group full releases mu and waits for room
// in that group alone, so it holds no capacity anywhere while it waits.
type memTopic[T any] struct {
	opts     Options
	isClosed atomic.Bool
	single   atomic.Pointer[memGroup[T]] // BalancedOnly: the live group, if any
	ring     *ring[T]                    // nil for BalancedOnly

	mu     sync.Mutex
	closed bool
	groups map[GroupName]*memGroup[T]
	glist  []*memGroup[T]
	bound  GroupName // BalancedOnly: the group fixed by the first subscription
}

// Publish implements State.
func (t *memTopic[T]) Publish(ctx context.Context, e Envelope[T], onFull OnFull) (PublishOutcome, error) {
	return t.publish(ctx, e, onFull == DropNewest)
}

// TryPublish implements State.
func (t *memTopic[T]) TryPublish(e Envelope[T]) (PublishOutcome, error) {
	return t.publish(context.Background(), e, true)
}

func (t *memTopic[T]) publish(ctx context.Context, e Envelope[T], noWait bool) (PublishOutcome, error) {
	if (noWait || t.opts.Mode != BalancedOnly) && isDone(ctx.Done()) {
		// (A blocking balanced-only publish leaves the check to the queue.)
		return Published, ctx.Err()
	}
	switch t.opts.Mode {
	case BalancedOnly:
		return t.publishSingle(ctx, e, noWait)
	case BroadcastOnly:
		return t.ring.publish(e, 0)
	default:
		return t.publishMixed(ctx, e, noWait)
	}
}

func (t *memTopic[T]) publishSingle(ctx context.Context, e Envelope[T], noWait bool) (PublishOutcome, error) {
	for {
		g := t.single.Load()
		if g == nil {
			// No queue to check ctx: a done ctx publishes nothing here too.
			if isDone(ctx.Done()) {
				return Published, ctx.Err()
			}
			if t.isClosed.Load() {
				return Published, ErrTopicClosed
			}
			e.Ticket.SetRecipients(0)
			return Published, nil
		}
		e.Ticket.SetRecipients(1)
		var err error
		if noWait {
			var ok bool
			ok, err = g.q.TryPublish(memEnvOf(&e))
			if err == nil && !ok {
				return DroppedOnFull, nil
			}
		} else {
			err = g.q.Publish(ctx, memEnvOf(&e))
		}
		if err == nil {
			return Published, nil
		}
		if !errors.Is(err, ErrTopicClosed) || t.isClosed.Load() {
			return Published, err
		}
		// The group's last member left (its queue is closed and it is no
		// longer t.single): look again.
	}
}

func (t *memTopic[T]) publishMixed(ctx context.Context, e Envelope[T], noWait bool) (PublishOutcome, error) {
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return Published, ErrTopicClosed
		}
		var full *memGroup[T]
		for _, g := range t.glist {
			if g.q.Len() >= g.q.Cap() {
				full = g
				break
			}
		}
		if full == nil {
			evicted, dropped := t.ring.publishLocked(e, len(t.glist))
			me := memEnvOf(&e)
			for _, g := range t.glist {
				// Cannot fail: room was checked under mu, only mu holders
				// add (putBack included), and queues close only under mu.
				_, _ = g.q.TryPublish(me)
			}
			t.mu.Unlock()
			dropLagged(evicted, dropped)
			return Published, nil
		}
		t.mu.Unlock()
		if noWait {
			return DroppedOnFull, nil
		}
		if err := full.q.WaitRoom(ctx); err != nil && !errors.Is(err, ErrTopicClosed) {
			return Published, err
		}
		// Room appeared, or the group went away, or the topic closed: look
		// again.
	}
}

// Subscribe implements State. It waits for nothing; an ended ctx
// subscribes nothing. Mode mismatches are checked before the closed
// state, so they are reported even on a closed topic. opts.OnRelease is
// never called: nothing here waits for the messages a subscriber holds;
// nor is opts.Reach: there is no broker to lose.
func (t *memTopic[T]) Subscribe(ctx context.Context, mode SubscriptionMode, _ SubscriberOptions) (SubscriptionState[T], error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if mode.broadcast {
		if t.opts.Mode == BalancedOnly {
			return nil, ErrSubscribeBroadcastNotSupported
		}
		if t.closed {
			return nil, ErrTopicClosed
		}
		return t.ring.subscribe(), nil
	}
	if t.opts.Mode == BroadcastOnly {
		return nil, ErrSubscribeBalancedNotSupported
	}
	if t.opts.Mode == BalancedOnly && t.bound != "" && t.bound != mode.group {
		return nil, ErrSubscribeSingleGroupViolation
	}
	if t.closed {
		return nil, ErrTopicClosed
	}
	t.bound = mode.group
	g := t.groups[mode.group]
	if g == nil {
		g = &memGroup[T]{name: mode.group, q: queue.New[memEnv[T]](t.opts.Balanced.Capacity)}
		t.groups[g.name] = g
		t.glist = append(t.glist, g)
		if t.opts.Mode == BalancedOnly {
			t.single.Store(g)
		}
	}
	g.members++
	return &memMember[T]{t: t, g: g, stop: make(chan time.Time)}, nil
}

// leave removes one member of g; the last one removes the group, and the
// tracked messages still queued in it are dropped.
func (t *memTopic[T]) leave(g *memGroup[T]) {
	var lost []*Ticket
	t.mu.Lock()
	g.members--
	if g.members == 0 && t.groups[g.name] == g {
		delete(t.groups, g.name)
		if i := slices.Index(t.glist, g); i >= 0 {
			// Delete clears the slot it frees: the group's queue, allocated
			// to its capacity, must not stay reachable from glist.
			t.glist = slices.Delete(t.glist, i, i+1)
		}
		if t.single.Load() == g {
			t.single.Store(nil)
		}
		g.q.Close()
		buf := make([]memEnv[T], 64)
		for {
			n, _ := g.q.TryReceive(buf)
			if n == 0 {
				break
			}
			for _, e := range buf[:n] {
				if e.ticket != nil {
					lost = append(lost, e.ticket)
				}
			}
		}
	}
	t.mu.Unlock()
	for _, tk := range lost {
		tk.Drop(ErrDeliveryDropped)
	}
}

// Stats implements State.
func (t *memTopic[T]) Stats() StateStats {
	t.mu.Lock()
	s := StateStats{BalancedGroups: len(t.groups)}
	t.mu.Unlock()
	if t.ring != nil {
		s.BroadcastSubscribers, s.Lagged = t.ring.stats()
	}
	return s
}

// Close implements State: group queues and the ring close; members and
// subscribers drain what they hold.
func (t *memTopic[T]) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.closed = true
	t.isClosed.Store(true)
	for _, g := range t.glist {
		g.q.Close()
	}
	if t.ring != nil {
		t.ring.close()
	}
}

// memMember is one member of a balanced group.
type memMember[T any] struct {
	t      *memTopic[T]
	g      *memGroup[T]
	closed atomic.Bool
	stop   chan time.Time // closed by Close; wakes a waiting Receive
	buf    []memEnv[T]    // Receive's, which is not called concurrently
	take   uint64         // the number the group's queue gave Receive's latest take (see putBack); Receive's too
}

// Receive implements SubscriptionState. Close wakes it through the stop
// channel, used as the queue's alarm. A member whose Close has begun takes
// nothing from the group: what a Receive took while Close began (woken
// for a message and for Close at once, or between its first look at
// closed and the queue) goes back to the head of the group's queue, for
// the other members (see putBack), and Receive returns
// ErrSubscriptionClosed.
func (m *memMember[T]) Receive(ctx context.Context, dst []Envelope[T]) (int, error) {
	if m.closed.Load() {
		return 0, ErrSubscriptionClosed
	}
	if len(m.buf) < len(dst) {
		m.buf = make([]memEnv[T], len(dst))
	}
	n, take, err := m.g.q.ReceiveOrTake(ctx, m.buf[:len(dst)], m.stop)
	m.take = take
	if n == 0 && err == nil {
		return 0, ErrSubscriptionClosed
	}
	if n > 0 && m.closed.Load() {
		m.putBack(m.buf[:n])
		return 0, ErrSubscriptionClosed
	}
	for i := range n {
		me := &m.buf[i]
		dst[i] = me.envelope()
		*me = memEnv[T]{}
	}
	return n, err
}

// giveBack returns envs, which a Receive of m took from the group, to the
// group (see putBack). It runs on the receiving goroutine: it uses m.buf.
func (m *memMember[T]) giveBack(envs []Envelope[T]) {
	buf := m.buf[:len(envs)]
	for i := range envs {
		buf[i] = memEnvOf(&envs[i])
		envs[i] = Envelope[T]{}
	}
	m.putBack(buf)
}

// putBack puts msgs, which m's latest Receive took from the group, back
// at the head of the group's queue, in order, for the group's other
// members, as if m had never taken them. It does so only while no other
// member has taken a message from the queue since: that member would
// otherwise receive msgs after later messages it already has, and each
// member must see its share in publish order. A queue the topic's Close
// closed takes them back too while the group has a member (m counts until
// its leave, which drops what is queued when m is the last): the members
// drain a closed queue, and the topic's Close leaves its open subscribers
// what was delivered to their group before it. When another member has
// taken a message since,
// or when the group lost its last member, msgs are dropped: their tracked
// publishes are nacked with ErrDeliveryDropped, as for the messages the
// last member leaves queued. msgs is cleared.
//
// It holds the topic's lock: a mixed topic's publisher checks under it
// that every group has room and then adds the message to each, so
// nothing else may fill a group in between; and the group's members and
// the topic's closed state change under it too.
func (m *memMember[T]) putBack(msgs []memEnv[T]) {
	m.t.mu.Lock()
	var err error
	if m.t.closed && m.g.members > 0 {
		err = m.g.q.PutBackDraining(msgs, m.take)
	} else {
		err = m.g.q.PutBack(msgs, m.take)
	}
	m.t.mu.Unlock()
	if err != nil {
		for i := range msgs {
			msgs[i].ticket.Drop(ErrDeliveryDropped)
		}
	}
	clear(msgs)
}

// Settle implements SubscriptionState: the in-memory backend does not
// settle deliveries.
func (m *memMember[T]) Settle(MessageID, error) error { return ErrMessageNotTracked }

// Close implements SubscriptionState.
func (m *memMember[T]) Close() {
	if !m.closed.CompareAndSwap(false, true) {
		return
	}
	close(m.stop)
	m.t.leave(m.g)
}

func dropLagged(evicted *Ticket, dropped []*Ticket) {
	evicted.Drop(ErrLagged)
	for _, t := range dropped {
		t.Drop(ErrLagged)
	}
}
