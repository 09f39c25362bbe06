package testbroker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// GroupMember joins group on c with a plain franz-go client consuming
// topic and offering only balancer, polls until the test ends, and
// returns once the group is Stable with partitions assigned (within 20s).
// Its session outlasts a busy machine's stalls, so that it keeps the
// group while the test's members try to join.
func GroupMember(t testing.TB, c *kfake.Cluster, group, topic string, balancer kgo.GroupBalancer) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.Balancers(balancer),
		kgo.SessionTimeout(15*time.Second), kgo.HeartbeatInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	pollCtx, stopPoll := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil {
			cl.PollFetches(pollCtx)
		}
	}()
	t.Cleanup(func() { stopPoll(); <-polled; cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.WaitGroupInfo(ctx, group, func(gi *kfake.GroupInfo) bool {
		return gi != nil && gi.State == "Stable" && gi.NumAssigned() > 0
	}); err != nil {
		t.Fatalf("the group's first member did not join %q: %v", group, err)
	}
}
