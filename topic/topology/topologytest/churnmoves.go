package topologytest

import (
	"context"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// churnMove is what an instance's reader told of an assignment
// (topology.ShardsAssigned): at is when on the churn's clock, gone the
// keys whose shard it left out.
type churnMove struct {
	at   int64
	gone [churnKeys]bool
}

// movesQueues wraps an instance's queues so that each reader that tells
// of its shards (topology.ShardNotifier) has what it tells recorded as
// the instance's moves, as well as told to its source.
type movesQueues struct {
	topology.Queues[Msg]
	c    *churn
	inst int
}

func (q movesQueues) Subscribe(ctx context.Context) (topology.Reader[Msg], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	sn, ok := r.(topology.ShardNotifier)
	if !ok {
		return r, nil
	}
	mr := &movesReader{Reader: r, sn: sn, c: q.c, inst: q.inst}
	if _, ok := r.(topology.PartTracker); ok {
		return trackingMovesReader{mr}, nil
	}
	return mr, nil
}

// trackingMovesReader is a movesReader over a reader that knows the part
// each letter came from, which it passes through.
type trackingMovesReader struct{ *movesReader }

var _ topology.PartTracker = trackingMovesReader{}

func (r trackingMovesReader) LetGo(receipt any) bool {
	return r.Reader.(topology.PartTracker).LetGo(receipt)
}

// movesReader is a reader that tells of its shards, and what it tells is
// recorded. It passes every other optional interface of a reader through
// to the one it wraps (a reader that lacks one answers as the Source
// reads its absence: nothing counted, nothing hurried, nothing reported).
type movesReader struct {
	topology.Reader[Msg]
	sn   topology.ShardNotifier
	c    *churn
	inst int
}

var (
	_ topology.ShardNotifier      = (*movesReader)(nil)
	_ topology.ReleaseNotifier    = (*movesReader)(nil)
	_ topology.ReachReporter      = (*movesReader)(nil)
	_ topology.UndecodableCounter = (*movesReader)(nil)
	_ topology.ResubscribeCounter = (*movesReader)(nil)
)

func (r *movesReader) OnShards(f func(topology.ShardChange, func(shard int) bool)) {
	if f == nil {
		r.sn.OnShards(nil)
		return
	}
	r.sn.OnShards(func(change topology.ShardChange, in func(shard int) bool) {
		if change == topology.ShardsAssigned {
			r.c.moved(r.inst, in)
		}
		f(change, in)
	})
}

func (r *movesReader) OnRelease(f func() (done func())) {
	if rn, ok := r.Reader.(topology.ReleaseNotifier); ok {
		rn.OnRelease(f)
	}
}

func (r *movesReader) ReportReach(o topic.ReachObserver) {
	if rr, ok := r.Reader.(topology.ReachReporter); ok {
		rr.ReportReach(o)
	}
}

func (r *movesReader) Undecodable() uint64 {
	if uc, ok := r.Reader.(topology.UndecodableCounter); ok {
		return uc.Undecodable()
	}
	return 0
}

func (r *movesReader) Resubscribes() uint64 {
	if rc, ok := r.Reader.(topology.ResubscribeCounter); ok {
		return rc.Resubscribes()
	}
	return 0
}

// moved records instance inst's new assignment, in.
func (c *churn) moved(inst int, in func(shard int) bool) {
	m := churnMove{at: c.clock.Add(1)}
	for k := range churnKeys {
		m.gone[k] = !in(topology.ShardOf(churnKey(k), c.top.RoutingShards()))
	}
	c.mu.Lock()
	c.moves[inst] = append(c.moves[inst], m)
	c.mu.Unlock()
}

// movedAway reports whether key index k moved away from instance inst
// between sent, the call that sent a letter of the key out, and at: the
// last assignment told to inst while sent ran left the key's shard out
// (the source then has the key done with as the letter goes out, not
// out), or one told after sent ended and before at did (the source then
// forgets the letter out).
func (c *churn) movedAway(inst, k int, sent churnCall, at int64) bool {
	var during *churnMove // the last assignment told while sent ran
	for i, m := range c.moves[inst] {
		switch {
		case m.at > sent.start && m.at < sent.end:
			during = &c.moves[inst][i]
		case m.at > sent.end && m.at < at && m.gone[k]:
			return true
		}
	}
	return during != nil && during.gone[k]
}
