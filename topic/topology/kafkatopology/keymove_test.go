package kafkatopology

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// seqMember is one member of a sequenced topology's group: a pipeline
// reading it through a Source, whose handler records what it handles
// and, unless started otherwise (startSeqMemberFailing), retries the
// first attempt of each key's message 1 (1, 11, ...: N%10 == 1).
type seqMember struct {
	q   topology.Queues[msg]
	src *topology.Source[msg]
	p   *pipeline.Pipeline[msg, msg]

	mu      sync.Mutex
	handled []string // "N/retries"
}

// startSeqMember starts a member of top's group on its own backend,
// whose client id is clientID: the group's range assignment gives the
// topic's one partition to the member whose id sorts first.
func startSeqMember(t *testing.T, brokers []string, clientID string, top *topology.Builder, set ...func(*Options[msg])) *seqMember {
	t.Helper()
	return startSeqMemberOn(t, clientID, declareMember(t, brokers, clientID, top, set...))
}

// declareMember declares top on a backend of its own whose client id is
// clientID.
func declareMember(t *testing.T, brokers []string, clientID string, top *topology.Builder, set ...func(*Options[msg])) topology.Queues[msg] {
	t.Helper()
	b := newBackend(t, brokers, append([]func(*Options[msg]){func(o *Options[msg]) { o.Config.ClientID = clientID }}, set...)...)
	return declare(t, b, top)
}

// startSeqMemberOn starts a member named clientID reading q.
func startSeqMemberOn(t *testing.T, clientID string, q topology.Queues[msg]) *seqMember {
	t.Helper()
	return startSeqMemberFailing(t, clientID, q, func(n, retries int) error {
		if n%10 == 1 && retries == 0 {
			return topology.Retry(errors.New("not yet"))
		}
		return nil
	})
}

// startSeqMemberFailing starts a member named clientID reading q, whose
// handler fails message n at its retries-th attempt with what fail
// returns (nil: handled).
func startSeqMemberFailing(t *testing.T, clientID string, q topology.Queues[msg], fail func(n, retries int) error) *seqMember {
	t.Helper()
	m := &seqMember{q: q}
	var err error
	m.src, err = topology.NewSource(topology.SourceOptions[msg]{Queues: m.q, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	m.p, err = pipeline.New(pipeline.Options[msg, msg]{
		Name:     clientID,
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[msg]{Source: m.src},
		Processors: processor.Options[msg, msg]{Concurrency: 1, Handle: func(_ context.Context, mm *message.Message[msg]) (msg, error) {
			d, _ := topology.DeliveryOf(mm)
			m.mu.Lock()
			m.handled = append(m.handled, fmt.Sprintf("%d/%d", mm.Data.N, d.Retries))
			m.mu.Unlock()
			if err := fail(mm.Data.N, d.Retries); err != nil {
				return msg{}, err
			}
			return mm.Data, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.p.Stop(context.Background()) })
	return m
}

func (m *seqMember) has(h string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Contains(m.handled, h)
}

func (m *seqMember) handledSoFar() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.handled)
}

func (m *seqMember) String() string {
	return fmt.Sprintf("handled %v, stats %+v", m.handledSoFar(), m.src.Stats())
}

// startKeyOut starts member name reading q, and has its key K's message
// 1 go out to the hold queue and message 2 wait behind it.
func startKeyOut(t *testing.T, name string, q topology.Queues[msg]) (*seqMember, func(n int)) {
	t.Helper()
	a := startSeqMemberOn(t, name, q)
	pub, err := topology.NewPublisher(a.q, topology.PublisherOptions[msg]{Key: func(msg) string { return "K" }})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(n int) {
		t.Helper()
		if err := pub.Publish(t.Context(), msg{N: n}); err != nil {
			t.Fatal(err)
		}
	}
	publish(1)
	wait.Within(t, 30*time.Second, "member "+name+" to send message 1 to the hold queue", func() bool { return a.src.Stats().Retried == 1 }, a.String)
	publish(2)
	wait.Within(t, 30*time.Second, "member "+name+" to hold message 2 back", func() bool { return a.src.Stats().HeldBack == 1 }, a.String)
	return a, publish
}

// Guarantee: a member of a sequenced topology's group whose partition a
// rebalance gives another member while a key's message is out in a hold
// queue stops waiting for that message, which comes back to the
// partition's new owner: when the partition comes back to the member, a
// later letter of the key is handled there at once, not held back until
// the member stops.
func TestAMemberThatGetsAKeysPartitionBackHandlesItsLetters(t *testing.T) {
	brokers := testbroker.Kafka(t).ListenAddrs()
	top := topology.New("keymove").Sequenced(topology.Skip).RoutingShards(1).Hold(5 * time.Second)
	a, publish := startKeyOut(t, "zulu", declareMember(t, brokers, "zulu", top))

	// B's member id sorts first: it takes the partition, and the message
	// out comes back to it.
	b := startSeqMember(t, brokers, "alpha", top)
	wait.Within(t, 60*time.Second, "member B to handle message 2, then 1 back from the hold queue",
		func() bool { return b.has("2/0") && b.has("1/1") }, b.String)
	if err := b.p.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.src.Close(t.Context()); err != nil { // leaves the group
		t.Fatal(err)
	}

	publish(3)
	wait.Within(t, 60*time.Second, "member A, the partition back, to handle message 3", func() bool { return a.has("3/0") }, a.String)
	if a.has("2/0") || a.has("1/1") {
		t.Errorf("member A handled what member B did: %v", a)
	}
}

// Guarantee: a member of a sequenced topology's group that a rebalance
// leaves the partition of a key whose message is out in a hold queue
// does not keep the rebalance waiting (up to RevokeTimeout) for the
// letters of the key it holds back, which cannot go before that message
// comes back: it gives them back at once, and, the partition assigned
// to it again, receives them again behind that message, in the key's
// order.
func TestAMemberKeepingAKeysPartitionThroughARebalanceKeepsItsOrder(t *testing.T) {
	brokers := testbroker.Kafka(t).ListenAddrs()
	top := topology.New("keystay").Sequenced(topology.Skip).RoutingShards(1).Hold(5 * time.Second)
	long := func(o *Options[msg]) { o.RevokeTimeout = 10 * time.Minute }
	a, _ := startKeyOut(t, "alpha", declareMember(t, brokers, "alpha", top, long))

	// C's member id sorts after A's: the rebalance its joining makes
	// gives the partition back to A.
	c := startSeqMember(t, brokers, "zulu", top, long)
	wait.Within(t, 2*time.Minute, "member A to handle message 1 back from the hold queue, then 2 (a revoke waiting out RevokeTimeout takes 10 minutes)",
		func() bool { return a.has("2/0") }, a.String)
	if got, want := a.handledSoFar(), []string{"1/0", "1/1", "2/0"}; !slices.Equal(got, want) {
		t.Errorf("member A handled %v, want %v", got, want)
	}
	if got := c.handledSoFar(); len(got) > 0 {
		t.Errorf("member C, which holds no partition, handled %v", got)
	}
}

// lateQueues are a sequenced topology's queues whose readers hand out
// their letter numbered late only once they have told that they let go
// of a part (topology.ShardsReleased): a revoke coming as the source
// takes it.
type lateQueues struct {
	topology.Queues[msg]
	late   int
	caught chan struct{} // closed once a reader has taken the letter
}

func (q *lateQueues) Subscribe(ctx context.Context) (topology.Reader[msg], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	lr := &lateReader{q: q, ctx: ctx, released: make(chan struct{})}
	lr.tellingReader = &tellingReader{groupReader: r.(*groupReader[msg]), told: func(c topology.ShardChange, _ func(int) bool) {
		if c == topology.ShardsReleased {
			lr.told.Do(func() { close(lr.released) })
		}
	}}
	return lr, nil
}

type lateReader struct {
	*tellingReader
	q        *lateQueues
	ctx      context.Context // the subscriber's: bounds the wait
	once     sync.Once
	told     sync.Once
	released chan struct{}
}

// tellingReader is a group reader that calls told after each change of
// its shards it tells its subscriber of.
type tellingReader struct {
	*groupReader[msg]
	told func(topology.ShardChange, func(shard int) bool)
}

func (r *tellingReader) OnShards(f func(topology.ShardChange, func(shard int) bool)) {
	if f == nil {
		r.groupReader.OnShards(nil)
		return
	}
	r.groupReader.OnShards(func(c topology.ShardChange, in func(shard int) bool) {
		f(c, in)
		r.told(c, in)
	})
}

func (r *lateReader) Receive(ctx context.Context, dst []topology.Letter[msg]) (int, error) {
	n, err := r.groupReader.Receive(ctx, dst)
	if slices.ContainsFunc(dst[:n], func(l topology.Letter[msg]) bool { return l.Value.N == r.q.late }) {
		r.once.Do(func() { close(r.q.caught) })
		select {
		case <-r.released:
		case <-r.ctx.Done():
		}
	}
	return n, err
}

// Guarantee: a member of a sequenced topology's group that took a letter
// of a key whose message is out in a hold queue just before a rebalance
// revoked the key's partition does not keep the rebalance waiting (up to
// RevokeTimeout) for that letter: it gives it back, and, the partition
// assigned to it again, receives it again behind the message out, in the
// key's order.
func TestARevokeDoesNotWaitForALetterTakenAsItCame(t *testing.T) {
	brokers := testbroker.Kafka(t).ListenAddrs()
	top := topology.New("keylate").Sequenced(topology.Skip).RoutingShards(1).Hold(5 * time.Second)
	long := func(o *Options[msg]) { o.RevokeTimeout = 10 * time.Minute }
	q := &lateQueues{Queues: declareMember(t, brokers, "alpha", top, long), late: 3, caught: make(chan struct{})}
	a, publish := startKeyOut(t, "alpha", q)
	publish(3)
	select {
	case <-q.caught:
	case <-time.After(30 * time.Second):
		t.Fatalf("member A did not take message 3: %v", a)
	}

	// C's member id sorts after A's: the rebalance its joining makes
	// gives the partition back to A.
	startSeqMember(t, brokers, "zulu", top, long)
	wait.Within(t, 2*time.Minute, "member A to handle message 1 back from the hold queue, then 2 and 3 (a revoke waiting out RevokeTimeout takes 10 minutes)",
		func() bool { return a.has("3/0") }, a.String)
	if got, want := a.handledSoFar(), []string{"1/0", "1/1", "2/0", "3/0"}; !slices.Equal(got, want) {
		t.Errorf("member A handled %v, want %v", got, want)
	}
}

// cooperative has a member's group rebalance incrementally
// (cooperative-sticky): its session outlives the rebalances, which
// revoke and assign only the partitions that move.
func cooperative(o *Options[msg]) {
	o.Config.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
}

// twoShardKeys returns a key of each of a two-shard sequenced topology's
// shards (keys[i] is of shard i), and what publishes to q the messages
// numbered ns, message n of keys[n/10]: a key's messages are numbered
// from 10*i+1.
func twoShardKeys(t *testing.T, q topology.Queues[msg]) (keys [2]string, publish func(ns ...int)) {
	t.Helper()
	for i := 0; keys[0] == "" || keys[1] == ""; i++ {
		k := fmt.Sprintf("K%d", i)
		keys[topology.ShardOf(k, 2)] = cmp.Or(keys[topology.ShardOf(k, 2)], k)
	}
	pub, err := topology.NewPublisher(q, topology.PublisherOptions[msg]{Key: func(m msg) string { return m.Key }})
	if err != nil {
		t.Fatal(err)
	}
	return keys, func(ns ...int) {
		t.Helper()
		for _, n := range ns {
			if err := pub.Publish(t.Context(), msg{Key: keys[n/10], N: n}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Guarantee: under a cooperative rebalance protocol, whose group session
// goes on across rebalances, a member whose partition moves to another
// member while a key of it has its message out in a hold queue, and
// comes back to it later in the same session, handles the key's later
// letters there at once: the message came back to the other member, and
// the member does not hold the letters back for it until it stops.
func TestAMemberThatGetsAKeysPartitionBackInACooperativeRebalanceHandlesItsLetters(t *testing.T) {
	brokers := testbroker.Kafka(t).ListenAddrs()
	top := topology.New("coopmove").Sequenced(topology.Skip).RoutingShards(2).Hold(5 * time.Second)
	a := startSeqMember(t, brokers, "alpha", top, cooperative)
	_, publish := twoShardKeys(t, a.q)
	publish(1, 11)
	wait.Within(t, 30*time.Second, "member A to send messages 1 and 11 to the hold queue", func() bool { return a.src.Stats().Retried == 2 }, a.String)
	publish(2, 12)
	wait.Within(t, 30*time.Second, "member A to hold messages 2 and 12 back", func() bool { return a.src.Stats().HeldBack == 2 }, a.String)

	// B joining takes one of the two partitions, and the message out of
	// its key comes back to B.
	b := startSeqMember(t, brokers, "zulu", top, cooperative)
	moved := -1
	wait.Within(t, 60*time.Second, "member B to handle a key's message 2, then 1 back from the hold queue", func() bool {
		for _, base := range []int{0, 10} {
			if b.has(fmt.Sprintf("%d/0", base+2)) && b.has(fmt.Sprintf("%d/1", base+1)) {
				moved = base
				return true
			}
		}
		return false
	}, b.String)
	if err := b.p.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.src.Close(t.Context()); err != nil { // leaves the group
		t.Fatal(err)
	}

	publish(moved + 3)
	wait.Within(t, 60*time.Second, fmt.Sprintf("member A, the partition back, to handle message %d", moved+3),
		func() bool { return a.has(fmt.Sprintf("%d/0", moved+3)) }, a.String)
}
