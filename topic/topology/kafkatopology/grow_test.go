package kafkatopology

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
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

// leftOutQueues are a sequenced topology's queues whose readers count
// the assignments they tell their source of that leave a routing shard
// out.
type leftOutQueues struct {
	topology.Queues[msg]
	shards  int
	leftOut atomic.Int32
}

func (q *leftOutQueues) Subscribe(ctx context.Context) (topology.Reader[msg], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	return &tellingReader{groupReader: r.(*groupReader[msg]), told: func(c topology.ShardChange, in func(shard int) bool) {
		if c != topology.ShardsAssigned {
			return
		}
		for s := range q.shards {
			if !in(s) {
				q.leftOut.Add(1)
				return
			}
		}
	}}, nil
}

// ledger is what the members of a group handled: each key's numbers in
// the order their handling ended.
type ledger struct {
	mu      sync.Mutex
	handled map[string][]int
}

func (l *ledger) add(m msg) {
	l.mu.Lock()
	l.handled[m.Key] = append(l.handled[m.Key], m.N)
	l.mu.Unlock()
}

// missing returns the letters of want (key to numbers) not handled yet.
func (l *ledger) missing(want map[string][]int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k, ns := range want {
		for _, n := range ns {
			if !slices.Contains(l.handled[k], n) {
				out = append(out, fmt.Sprintf("%s%d", k, n))
			}
		}
	}
	slices.Sort(out)
	return out
}

// startGateMember starts a member named name reading q, handling four
// letters at a time; each handling waits for gate to be closed, counted
// in entered as it begins, and ends recorded in l.
func startGateMember(t *testing.T, name string, q topology.Queues[msg], gate <-chan struct{}, entered *atomic.Int32, l *ledger) *topology.Source[msg] {
	t.Helper()
	src, err := topology.NewSource(topology.SourceOptions[msg]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Options[msg, msg]{
		Name:     name,
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[msg]{Source: src},
		Processors: processor.Options[msg, msg]{Concurrency: 4, Handle: func(ctx context.Context, m *message.Message[msg]) (msg, error) {
			entered.Add(1)
			select {
			case <-gate:
			case <-ctx.Done():
				return msg{}, ctx.Err()
			}
			l.add(m.Data)
			return m.Data, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	return src
}

// Guarantee: partitions added to the main topic of a running sequenced
// topology, with letters of every routing shard still waiting on its
// partitions, cost no letter and stall no partition: a member whose new
// assignment leaves out a shard that the grown partition count routes
// elsewhere still handles the letters of that shard waiting on the
// partitions it holds, every letter published before and after is
// handled at least once, the group commits every partition to its end,
// and each key's letters published before the change are handled in
// their order, as are those published after.
func TestAGrownSequencedTopicHandlesEveryLetterInItsKeysOrder(t *testing.T) {
	const shards, before, after = 4, int32(2), int32(4)
	c := testbroker.Kafka(t)
	brokers := c.ListenAddrs()
	top := topology.New("grow").Sequenced(topology.Skip).RoutingShards(shards).Hold(5 * time.Second)
	kname := kafkaName("grow")
	admin := testbroker.Admin(t, brokers)
	if err := admin.CreateTopic(kname, &sarama.TopicDetail{NumPartitions: before, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	// The clients learn of the added partitions within 100ms; a revoke
	// waits 500ms for the letters held in the closed gate.
	fast := func(o *Options[msg]) {
		o.Config.Metadata.RefreshFrequency = 100 * time.Millisecond
		o.RevokeTimeout = 500 * time.Millisecond
	}
	ba := newBackend(t, brokers, func(o *Options[msg]) { o.Config.ClientID = "alpha" }, fast)
	qa := &leftOutQueues{Queues: declare(t, ba, top), shards: shards}

	// Two keys of each routing shard.
	var keys []string
	var per [shards]int
	for i := 0; len(keys) < 2*shards; i++ {
		k := fmt.Sprintf("K%d", i)
		if s := topology.ShardOf(k, shards); per[s] < 2 {
			per[s]++
			keys = append(keys, k)
		}
	}
	pub, err := topology.NewPublisher(qa, topology.PublisherOptions[msg]{Key: func(m msg) string { return m.Key }})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int{}
	publish := func(from, to int) {
		t.Helper()
		for n := from; n <= to; n++ {
			for _, k := range keys {
				if err := pub.Publish(t.Context(), msg{Key: k, N: n}); err != nil {
					t.Fatal(err)
				}
				want[k] = append(want[k], n)
			}
		}
	}

	gate := make(chan struct{})
	l := &ledger{handled: map[string][]int{}}
	var entered atomic.Int32
	a := startGateMember(t, "alpha", qa, gate, &entered, l)
	publish(1, 5)
	wait.Within(t, 30*time.Second, "member A to begin handling", func() bool { return entered.Load() > 0 },
		func() string { return fmt.Sprintf("stats %+v", a.Stats()) })

	// Shard s's letters went to partition s%2; from now on they go to
	// partition s. Member A's client learns so before B joins.
	if err := admin.CreatePartitions(kname, after, nil, false); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, 30*time.Second, "member A's client to learn of the added partitions", func() bool {
		ps, err := ba.client.Partitions(kname)
		return err == nil && len(ps) == int(after)
	})
	// B's member id sorts after A's: the range assignment gives A
	// partitions 0 and 1, which leaves shards 2 and 3 out, and B 2 and 3.
	qb := declareMember(t, brokers, "zulu", top, fast)
	startGateMember(t, "zulu", qb, gate, &entered, l)
	wait.Within(t, 30*time.Second, "member A to be told an assignment that leaves a shard out",
		func() bool { return qa.leftOut.Load() > 0 }, func() string { return fmt.Sprintf("stats %+v", a.Stats()) })
	close(gate)
	publish(101, 105)

	wait.Within(t, 30*time.Second, "every letter to be handled", func() bool { return len(l.missing(want)) == 0 },
		func() string { return fmt.Sprintf("missing %v; stats %+v", l.missing(want), a.Stats()) })
	testbroker.CommittedToTheEnd(t, c, 30*time.Second, kname, qa.Queues.(*queues[msg]).groupID(), testbroker.Log(t, brokers, kname))

	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		// A letter handled again (delivered again after a rebalance)
		// counts where it was first handled.
		var first []int
		for _, n := range l.handled[k] {
			if !slices.Contains(first, n) {
				first = append(first, n)
			}
		}
		var old, grown []int
		for _, n := range first {
			if n > 100 {
				grown = append(grown, n)
			} else {
				old = append(old, n)
			}
		}
		if !slices.IsSorted(old) || !slices.IsSorted(grown) {
			t.Errorf("key %s (shard %d) was first handled in the order %v, want those published before the partitions were added in order, and those after",
				k, topology.ShardOf(k, shards), first)
		}
	}
}
