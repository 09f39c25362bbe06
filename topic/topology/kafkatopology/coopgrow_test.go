package kafkatopology

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// tellsQueues are a sequenced topology's queues whose readers record
// what they tell their source of their shards.
type tellsQueues struct {
	topology.Queues[msg]
	shards int

	mu     sync.Mutex
	tells  []string // "released [2]", "assigned [0 1 2 3]"
	reader *groupReader[msg]
}

// claims returns how many partitions the last reader subscribed claims.
func (q *tellsQueues) claims() int {
	q.mu.Lock()
	r := q.reader
	q.mu.Unlock()
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.claims)
}

func (q *tellsQueues) Subscribe(ctx context.Context) (topology.Reader[msg], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	q.reader = r.(*groupReader[msg])
	q.mu.Unlock()
	return &tellingReader{groupReader: r.(*groupReader[msg]), told: func(c topology.ShardChange, in func(shard int) bool) {
		var ss []int
		for s := range q.shards {
			if in(s) {
				ss = append(ss, s)
			}
		}
		q.mu.Lock()
		q.tells = append(q.tells, fmt.Sprintf("%s %v", c, ss))
		q.mu.Unlock()
	}}, nil
}

func (q *tellsQueues) told() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.tells)
}

// grownHold is a sequenced topology's group of two routing shards read
// under a cooperative rebalance protocol by member A, which holds back
// letters 2 and 3 of a key of shard 1 behind the key's message 1, out
// in a hold queue, taken from partition 0 of a topic of one partition,
// and claims partition 1 once it is added: shard 1 goes to partition 0
// before, to partition 1 after.
type grownHold struct {
	c     *kfake.Cluster
	kname string
	top   *topology.Builder
	set   []func(*Options[msg])
	qa    *tellsQueues
	a     *seqMember
}

// startGrownHold starts member A and the key's letters, adds the
// partition and waits for A to claim it.
func startGrownHold(t *testing.T, name string, hold time.Duration) *grownHold {
	t.Helper()
	g := &grownHold{c: testbroker.Kafka(t), kname: kafkaName(name),
		top: topology.New(name).Sequenced(topology.Skip).RoutingShards(2).Hold(hold)}
	brokers := g.c.ListenAddrs()
	admin := testbroker.Admin(t, brokers)
	if err := admin.CreateTopic(g.kname, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	g.set = []func(*Options[msg]){cooperative, func(o *Options[msg]) {
		o.Config.Metadata.RefreshFrequency = 100 * time.Millisecond
		// A revoke that waits RevokeTimeout keeps the rebalance
		// waiting, rather than ending the member's session.
		o.Config.Consumer.Group.Rebalance.Timeout = 2 * time.Minute
		o.RevokeTimeout = time.Minute
	}}
	g.qa = &tellsQueues{Queues: declareMember(t, brokers, "alpha", g.top, g.set...), shards: 2}
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("K%d", i); topology.ShardOf(k, 2) == 1 {
			key = k
		}
	}
	g.a = startSeqMemberOn(t, "alpha", g.qa)
	pub, err := topology.NewPublisher(g.qa, topology.PublisherOptions[msg]{Key: func(m msg) string { return m.Key }})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(n int) {
		t.Helper()
		if err := pub.Publish(t.Context(), msg{Key: key, N: n}); err != nil {
			t.Fatal(err)
		}
	}
	publish(1)
	wait.Within(t, 30*time.Second, "member A to send message 1 to the hold queue", func() bool { return g.a.src.Stats().Retried == 1 }, g.a.String)
	publish(2)
	publish(3)
	wait.Within(t, 30*time.Second, "member A to hold messages 2 and 3 back", func() bool { return g.a.src.Stats().HeldBack == 2 }, g.a.String)

	if err := admin.CreatePartitions(g.kname, 2, nil, false); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, 30*time.Second, "member A to claim the added partition", func() bool { return g.qa.claims() == 2 }, g.String)
	return g
}

func (g *grownHold) String() string { return fmt.Sprintf("member A told %v, %v", g.qa.told(), g.a) }

// committedToTheEnd waits up to patience for the group to commit every
// partition of the topic to its end.
func (g *grownHold) committedToTheEnd(t *testing.T, patience time.Duration) {
	t.Helper()
	testbroker.CommittedToTheEnd(t, g.c, patience, g.kname, g.qa.Queues.(*queues[msg]).groupID(), testbroker.Log(t, g.c.ListenAddrs(), g.kname))
}

// Guarantee: under a cooperative rebalance protocol, a member of a
// sequenced topology's group that holds back letters of a key behind its
// message out in a hold queue, and claims a partition then added to its
// topic, to which the grown count routes the key's shard, keeps holding
// them back behind that message, which comes back to it there: it
// handles the key's letters in their order, and the group commits every
// partition to its end, without waiting for a later rebalance.
func TestAMemberClaimingAPartitionAddedToItsTopicKeepsItsKeysOrder(t *testing.T) {
	g := startGrownHold(t, "coopgrowclaim", 5*time.Second)
	wait.Within(t, 30*time.Second, "member A to handle message 1 back from the hold queue, then 2 and 3", func() bool { return g.a.has("3/0") }, g.String)
	if got, want := g.a.handledSoFar(), []string{"1/0", "1/1", "2/0", "3/0"}; !slices.Equal(got, want) {
		t.Errorf("member A handled %v, want %v", got, want)
	}
	g.committedToTheEnd(t, 30*time.Second)
}

// Guarantee: under a cooperative rebalance protocol, a member of a
// sequenced topology's group that holds back letters of a key behind its
// message out in a hold queue, taken from the partition the key's shard
// went to before a partition was added to its topic, and that a
// rebalance then leaves one of the key's two partitions and revokes the
// other (the one it took the letters from, or the one the grown count
// routes the key's shard to), stalls no partition and keeps the
// rebalance waiting RevokeTimeout for none of them: the letters are
// handled, and the group commits every partition to its end, well
// within RevokeTimeout, without waiting for the key's message out (it
// comes back after the test) or a later rebalance.
func TestACooperativeRebalanceAfterAPartitionIsAddedStallsNoPartition(t *testing.T) {
	g := startGrownHold(t, "coopgrow", 2*time.Minute)
	wait.Within(t, 30*time.Second, "member A to hold messages 2 and 3 back", func() bool { return g.a.src.Stats().HeldBack == 2 }, g.String)
	// B joining takes one of the two partitions from A, which keeps its
	// session and the other one.
	b := startSeqMember(t, g.c.ListenAddrs(), "zulu", g.top, g.set...)
	wait.Within(t, 30*time.Second, "messages 2 and 3 to be handled", func() bool {
		return (g.a.has("2/0") || b.has("2/0")) && (g.a.has("3/0") || b.has("3/0"))
	}, func() string { return fmt.Sprintf("%v; member B %v", g, b) })
	g.committedToTheEnd(t, 30*time.Second)
	t.Logf("%v; member B %v", g, b)
}
