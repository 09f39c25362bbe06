package kafkatopology

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a member of a sequenced FailAll topology's group that
// poisoned a key forgets the poisoning once its new assignment leaves
// the key's partition out, under an eager or a cooperative rebalance
// protocol: its Stats.PoisonedKeys no longer counts the key, and when
// the partition comes back to it, after the other member handled the
// key's letters, it handles the key's later letters too rather than
// dead-lettering them. A key whose partition stayed with the member
// stays poisoned there.
func TestAPoisoningIsForgottenWhenItsPartitionLeavesTheMember(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []func(*Options[msg])
	}{
		{"eager", nil},
		{"cooperative", []func(*Options[msg]){cooperative}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			brokers := testbroker.Kafka(t).ListenAddrs()
			name := "poisonmove-" + tc.name
			top := topology.New(name).Sequenced(topology.FailAll).RoutingShards(2).DLQ()
			// A key's first message is rejected, and poisons the key.
			rejectFirst := func(n, _ int) error {
				if n%10 == 1 {
					return topology.Reject(errors.New("reading out of range"))
				}
				return nil
			}
			member := func(name string) (*seqMember, *Backend[msg]) {
				b := newBackend(t, brokers, append([]func(*Options[msg]){func(o *Options[msg]) { o.Config.ClientID = name }}, tc.set...)...)
				return startSeqMemberFailing(t, name, declare(t, b, top), rejectFirst), b
			}
			// claimed returns the partitions of the topic b's reader claims.
			claimed := func(b *Backend[msg]) []int32 {
				var ps []int32
				for _, p := range b.Stats().Partitions {
					if p.Topic == name {
						ps = append(ps, p.Partition)
					}
				}
				return ps
			}
			a, ab := member("zulu")
			keys, publish := twoShardKeys(t, a.q)
			publish(1, 11, 2, 12)
			wait.Within(t, 30*time.Second, "member A to poison both keys and dead-letter their messages", func() bool {
				st := a.src.Stats()
				return st.PoisonedKeys == 2 && st.DeadLettered == 4
			}, a.String)

			// B joining takes one of the two partitions.
			b, bb := member("alpha")
			state := func() string { return fmt.Sprintf("A claims %v, B %v", claimed(ab), claimed(bb)) }
			wait.Within(t, 60*time.Second, "members A and B to claim a partition each", func() bool {
				pa, pb := claimed(ab), claimed(bb)
				return len(pa) == 1 && len(pb) == 1 && pa[0] != pb[0]
			}, state)
			parts, err := ab.client.Partitions(name)
			if err != nil {
				t.Fatal(err)
			}
			moved := slices.IndexFunc(keys[:], func(k string) bool {
				return shardPartition(parts, topology.ShardOf(k, 2)) == claimed(bb)[0]
			})
			kept := 1 - moved
			publish(10*moved + 3)
			wait.Within(t, 60*time.Second, fmt.Sprintf("member B to handle message %d", 10*moved+3),
				func() bool { return b.has(fmt.Sprintf("%d/0", 10*moved+3)) }, b.String)
			wait.Within(t, 30*time.Second, "member A, one partition gone, to forget the poisoning of its key",
				func() bool { return a.src.Stats().PoisonedKeys == 1 }, a.String)
			if err := b.p.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := b.src.Close(t.Context()); err != nil { // leaves the group
				t.Fatal(err)
			}

			publish(10*moved+4, 10*kept+4)
			wait.Within(t, 60*time.Second, "member A, the partition back, to settle both keys' message 4", func() bool {
				st := a.src.Stats()
				return st.Acked+st.DeadLettered == 6
			}, a.String)
			if !a.has(fmt.Sprintf("%d/0", 10*moved+4)) {
				t.Errorf("member A, the partition back, dead-lettered message %d of key %s, whose letters member B handled since: %v", 10*moved+4, keys[moved], a)
			}
			if a.has(fmt.Sprintf("%d/0", 10*kept+4)) {
				t.Errorf("member A handled message %d of key %s, which it poisoned and whose partition it kept: %v", 10*kept+4, keys[kept], a)
			}
		})
	}
}
