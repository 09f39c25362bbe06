package topology_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// deadOf returns a dead letter of value v that topic dead-lettered.
func deadOf(topic string, v int) topology.Letter[int] {
	return topology.Letter[int]{Value: v, Death: &topology.Death{Reason: topology.ReasonRejected, Topic: topic, Group: topic}}
}

// dlqValues receives, once, what the DLQ of q holds, in order.
func dlqValues(t *testing.T, q topology.Queues[int]) []int {
	t.Helper()
	r, err := q.SubscribeDead(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	return queuedValues(r)
}

// onlyLetter receives from r the one letter it holds (what it is, for
// the failure), failing t unless it holds exactly one.
func onlyLetter(t *testing.T, r topology.Reader[int], what string) topology.Letter[int] {
	t.Helper()
	buf := make([]topology.Letter[int], 2)
	n, err := r.TryReceive(t.Context(), buf)
	if err != nil || n != 1 {
		t.Fatalf("TryReceive = %d, %v, want %s", n, err, what)
	}
	return buf[0]
}

// Guarantee: a replayed dead letter comes back to the main topic with a
// fresh history, so that it gets every retry again and is not taken for
// a dead letter (retry count 0, no failure times, no death), and with its
// key and shard, so that a sequenced topology keeps its order.
func TestReplayedLetterComesBackWithAFreshHistoryAndItsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := declareMemory(t, build(t, topology.New("fresh").Sequenced(topology.Skip).Hold(time.Second).DLQ()))
		failed := time.Now()
		shard := topology.ShardOf("A", 8)
		dead := topology.Letter[int]{Value: 7, Key: "A", Shard: shard, Retries: 3, FirstFailure: failed, LastFailure: failed.Add(time.Second),
			Death: &topology.Death{Reason: topology.ReasonMaxRetries, Error: "gateway down", Topic: "fresh", Group: "fresh", Retries: 3,
				FirstFailure: failed, LastFailure: failed.Add(time.Second)}}
		if err := q.DeadLetter(t.Context(), dead); err != nil {
			t.Fatal(err)
		}
		rep, err := topology.Replay(t.Context(), q, topology.ReplayOptions[int]{})
		if err != nil || len(rep.Replayed) != 1 || rep.Kept != 0 {
			t.Fatalf("Replay = %+v, %v; want the letter replayed", rep, err)
		}
		r, err := q.Subscribe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(t.Context())
		fresh := topology.Letter[int]{Value: 7, Key: "A", Shard: shard}
		if d := topologytest.LetterDiff(fresh, onlyLetter(t, r, "the replayed letter")); d != "" {
			t.Errorf("the replayed letter came back with %s", d)
		}
		if d := topologytest.LetterDiff(dead, rep.Replayed[0]); d != "" {
			t.Errorf("the report lists the replayed letter with %s: want it as it was in the DLQ", d)
		}
	})
}

// Guarantee: Replay of one topology never replays into it the letters of
// another topic that share its DLQ (DLQNamed): they stay in the DLQ, in
// their order, counted as kept.
func TestReplayLeavesTheLettersOfAnotherTopicInASharedDLQ(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(context.Background())
		qa, err := m.Declare(t.Context(), build(t, topology.New("pay").DLQNamed("all-dead")))
		if err != nil {
			t.Fatal(err)
		}
		qb, err := m.Declare(t.Context(), build(t, topology.New("ship").DLQNamed("all-dead")))
		if err != nil {
			t.Fatal(err)
		}
		for v, topic := range []string{"ship", "pay", "ship"} {
			if err := qb.DeadLetter(t.Context(), deadOf(topic, v)); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := topology.Replay(t.Context(), qa, topology.ReplayOptions[int]{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Replayed) != 1 || rep.Replayed[0].Value != 1 || rep.Kept != 2 {
			t.Errorf("Replay of pay reported %d replayed (%+v) and %d kept, want pay's letter 1 replayed and ship's 2 kept",
				len(rep.Replayed), rep.Replayed, rep.Kept)
		}
		if n := m.Queued("pay", "pay"); n != 1 {
			t.Errorf("pay's group holds %d letters after its Replay, want 1: its own", n)
		}
		if got := dlqValues(t, qb); !slices.Equal(got, []int{0, 2}) {
			t.Errorf("the shared DLQ holds %v after pay's Replay, want ship's [0 2]", got)
		}
	})
}

var errDLQGone = errors.New("dlq gone")

// Guarantee: Replay loses no dead letter the DLQ refuses to take back: a
// letter it keeps (a filter, or a dry run) that DeadLetter refuses, and
// the letters after it that DeadLetter refuses too, are given back to the
// DLQ (Return), all of them counted in Kept, and Replay returns the
// failure.
func TestReplayGivesBackTheDeadLettersTheDLQRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		opts topology.ReplayOptions[int]
	}{
		{"kept by the filter", topology.ReplayOptions[int]{Filter: func(*topology.Letter[int]) bool { return false }}},
		{"dry run", topology.ReplayOptions[int]{DryRun: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mq := withDeadLetters(t, "refused", 4)
				q := failingReplayQueues{Queues: mq, refuse: func(v int) bool { return v == 1 || v == 3 }}
				rep, err := topology.Replay(t.Context(), q, c.opts)
				if !errors.Is(err, errDLQGone) {
					t.Errorf("Replay = %v, want the DLQ's refusal", err)
				}
				if rep.Kept != 4 {
					t.Errorf("Replay reports %d kept, want 4: those put back and those given back", rep.Kept)
				}
				got := dlqValues(t, mq)
				slices.Sort(got)
				if !slices.Equal(got, []int{0, 1, 2, 3}) {
					t.Errorf("the DLQ holds %v after Replay, want [0 1 2 3]: none lost", got)
				}
			})
		})
	}
}

// Guarantee: Replay of one consumer group of a topic never replays into
// it the letters another group of the same topic dead-lettered into the
// DLQ they share (DLQNamed): that group's letters stay in the DLQ, in
// their order, counted as kept, for its own replay; a letter that names
// no group is the replaying group's.
func TestReplayLeavesTheLettersOfAnotherGroupInASharedDLQ(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(context.Background())
		pay, err := m.Declare(t.Context(), build(t, topology.New("orders").ForConsumerGroup("pay").DLQNamed("all-dead")))
		if err != nil {
			t.Fatal(err)
		}
		audit, err := m.Declare(t.Context(), build(t, topology.New("orders").ForConsumerGroup("audit").DLQNamed("all-dead")))
		if err != nil {
			t.Fatal(err)
		}
		deadIn := func(group string, v int) topology.Letter[int] {
			l := deadOf("orders", v)
			l.Death.Group = group
			return l
		}
		for _, l := range []topology.Letter[int]{deadIn("audit", 0), deadIn("pay", 1), deadIn("audit", 2), deadIn("", 3)} {
			if err := pay.DeadLetter(t.Context(), l); err != nil {
				t.Fatal(err)
			}
		}
		var offered []int
		rep, err := topology.Replay(t.Context(), pay, topology.ReplayOptions[int]{Filter: func(l *topology.Letter[int]) bool {
			offered = append(offered, l.Value)
			return true
		}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(offered, []int{1, 3}) {
			t.Errorf("pay's Replay offered %v to its filter, want [1 3]: its own letter and the one naming no group", offered)
		}
		var replayed []int
		for _, l := range rep.Replayed {
			replayed = append(replayed, l.Value)
		}
		if !slices.Equal(replayed, []int{1, 3}) || rep.Kept != 2 {
			t.Errorf("pay's Replay reported %v replayed and %d kept, want [1 3] replayed and audit's 2 kept", replayed, rep.Kept)
		}
		if n := m.Queued("orders", "pay"); n != 2 {
			t.Errorf("pay's group holds %d letters after its Replay, want 2", n)
		}
		if n := m.Queued("orders", "audit"); n != 0 {
			t.Errorf("audit's group holds %d letters after pay's Replay, want none", n)
		}
		if got := dlqValues(t, audit); !slices.Equal(got, []int{0, 2}) {
			t.Errorf("the shared DLQ holds %v after pay's Replay, want audit's [0 2]", got)
		}
	})
}

// Guarantee: Replay never puts a letter of another topic into its own:
// in a DLQ that the topologies of two topics share (DLQNamed), read by
// consumer groups of the same name, each topic's Replay replays its own
// letters only, and the other topic's stay in the DLQ, counted as kept.
func TestReplayLeavesTheLettersOfAnotherTopicWhoseGroupHasTheSameName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(context.Background())
		orders, err := m.Declare(t.Context(), build(t, topology.New("orders").ForConsumerGroup("billing").DLQNamed("all-dead")))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Declare(t.Context(), build(t, topology.New("refunds").ForConsumerGroup("billing").DLQNamed("all-dead"))); err != nil {
			t.Fatal(err)
		}
		for i, topic := range []string{"refunds", "orders", "refunds"} {
			l := deadOf(topic, i)
			l.Death.Group = "billing"
			if err := orders.DeadLetter(t.Context(), l); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := topology.Replay(t.Context(), orders, topology.ReplayOptions[int]{})
		if err != nil {
			t.Fatal(err)
		}
		var replayed []int
		for _, l := range rep.Replayed {
			replayed = append(replayed, l.Value)
		}
		if !slices.Equal(replayed, []int{1}) || rep.Kept != 2 {
			t.Errorf("orders' Replay reported %v replayed and %d kept, want [1] replayed and refunds' 2 kept", replayed, rep.Kept)
		}
		if n := m.Queued("orders", "billing"); n != 1 {
			t.Errorf("orders' group holds %d letters after its Replay, want 1", n)
		}
		if n := m.Queued("refunds", "billing"); n != 0 {
			t.Errorf("refunds' group holds %d letters after orders' Replay, want none", n)
		}
	})
}

// withDeadLetters declares topology name, with a DLQ, in memory and
// dead-letters into it n letters of values 0 to n-1.
func withDeadLetters(t *testing.T, name string, n int) topology.Queues[int] {
	t.Helper()
	_, mq := declareMemory(t, build(t, topology.New(name).DLQ()))
	for v := range n {
		if err := mq.DeadLetter(t.Context(), deadOf(name, v)); err != nil {
			t.Fatal(err)
		}
	}
	return mq
}

// failingReplayQueues fails the calls Replay makes on a DLQ, as a DLQ
// that is full or gone would: DeadLetter of the letters refuse picks, Return when returnErr is set, and the
// DLQ reader's Close when closeErr is set.
type failingReplayQueues struct {
	topology.Queues[int]
	refuse              func(v int) bool
	returnErr, closeErr error
}

func (q failingReplayQueues) DeadLetter(ctx context.Context, l topology.Letter[int]) error {
	if q.refuse != nil && q.refuse(l.Value) {
		return fmt.Errorf("letter %d: %w", l.Value, errDLQGone)
	}
	return q.Queues.DeadLetter(ctx, l)
}

func (q failingReplayQueues) Return(ctx context.Context, ls []topology.Letter[int]) error {
	if q.returnErr != nil {
		return q.returnErr
	}
	return q.Queues.Return(ctx, ls)
}

func (q failingReplayQueues) SubscribeDead(ctx context.Context) (topology.Reader[int], error) {
	r, err := q.Queues.SubscribeDead(ctx)
	if err != nil || q.closeErr == nil {
		return r, err
	}
	return failingClose{Reader: r, err: q.closeErr}, nil
}

// failingClose is a reader whose Close closes it and returns err.
type failingClose struct {
	topology.Reader[int]
	err error
}

func (r failingClose) Close(ctx context.Context) error {
	_ = r.Reader.Close(ctx)
	return r.err
}

// Guarantee: each failure of the DLQ that Replay meets reaches its caller
// through errors.Is, whichever letter and whichever call it is: the DLQ
// refusing the letter Replay keeps last, refusing a letter Replay puts
// back after a Filter panicked, refusing the letters given back, and
// failing to close its reader.
func TestReplayReturnsEachFailureOfTheDLQ(t *testing.T) {
	errReturn, errClose := errors.New("return refused"), errors.New("close failed")
	keepAll := topology.ReplayOptions[int]{Filter: func(*topology.Letter[int]) bool { return false }}
	panicOnFirst := topology.ReplayOptions[int]{Filter: func(l *topology.Letter[int]) bool {
		if l.Value == 0 {
			panic("filter broke")
		}
		return false
	}}
	for _, c := range []struct {
		name string
		q    func(topology.Queues[int]) failingReplayQueues
		opts topology.ReplayOptions[int]
		want error
	}{
		{"the last kept letter refused", func(mq topology.Queues[int]) failingReplayQueues {
			return failingReplayQueues{Queues: mq, refuse: func(v int) bool { return v == 3 }}
		}, keepAll, errDLQGone},
		{"a letter refused after a Filter panic", func(mq topology.Queues[int]) failingReplayQueues {
			return failingReplayQueues{Queues: mq, refuse: func(v int) bool { return v == 2 }}
		}, panicOnFirst, errDLQGone},
		{"the letters given back refused", func(mq topology.Queues[int]) failingReplayQueues {
			return failingReplayQueues{Queues: mq, refuse: func(v int) bool { return v == 3 }, returnErr: errReturn}
		}, keepAll, errReturn},
		{"the DLQ reader's Close failing", func(mq topology.Queues[int]) failingReplayQueues {
			return failingReplayQueues{Queues: mq, closeErr: errClose}
		}, keepAll, errClose},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mq := withDeadLetters(t, "failing", 4)
				_, err := topology.Replay(t.Context(), c.q(mq), c.opts)
				if !errors.Is(err, c.want) || !strings.Contains(fmt.Sprint(err), "topology failing: replay") {
					t.Errorf("Replay = %v, want an error naming topology failing's replay and wrapping %q", err, c.want)
				}
			})
		})
	}
}
