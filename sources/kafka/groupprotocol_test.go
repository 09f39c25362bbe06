package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/kafka/franz"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Guarantee: a member that joins a group whose members offer none of its
// partition assignment strategies (the sarama source's default, range,
// beside franz-go's default, cooperative-sticky, as in a rolling move
// from one client to the other) fails with an error wrapping
// ErrGroupProtocol and the client's INCONSISTENT_GROUP_PROTOCOL, on one
// line, that names the group and the member's strategies and says what
// to set, rather than only the broker's words.
func TestJoinRefusedForTheGroupsStrategiesNamesThemAndWhatToSet(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const group = "g-strategies"
		c := newCluster(t, 2)
		// The group's running member offers the other client's default. Its
		// session outlasts a busy machine's stalls: were it to drop out,
		// the member under test would join the empty group.
		other, mine := kgo.CooperativeStickyBalancer(), "range"
		if cl.name == franzClient.name {
			other, mine = kgo.RangeBalancer(), "cooperative-sticky"
		}
		running, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(testTopic), kgo.Balancers(other),
			kgo.SessionTimeout(15*time.Second), kgo.HeartbeatInterval(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer running.Close()
		pollCtx, stopPoll := context.WithCancel(context.Background())
		polled := make(chan struct{})
		go func() {
			defer close(polled)
			for pollCtx.Err() == nil {
				running.PollFetches(pollCtx)
			}
		}()
		defer func() { stopPoll(); <-polled }()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := c.WaitGroupInfo(ctx, group, func(gi *kfake.GroupInfo) bool {
			return gi != nil && gi.State == "Stable" && gi.NumAssigned() == 2
		}); err != nil {
			t.Fatalf("the running member did not join: %v", err)
		}

		o := sourceOptions(c, group)
		o.Rebalance = mine // each client's default, which the tests' franz options replace with range
		err = runStage(t, cl.new(t, o), 60*time.Second)
		if !errors.Is(err, kafka.ErrGroupProtocol) || !errors.Is(err, franz.ErrGroupProtocol) ||
			!errors.Is(err, kafka.ErrConsume) || !errors.Is(err, cl.brokerErr(kerr.InconsistentGroupProtocol)) {
			t.Fatalf("Run = %v, want an error wrapping ErrConsume, ErrGroupProtocol and INCONSISTENT_GROUP_PROTOCOL", err)
		}
		msg := err.Error()
		for _, want := range []string{`group "` + group + `"`, `["` + mine + `"]`, "set Rebalance"} {
			if !strings.Contains(msg, want) {
				t.Errorf("Run's error %q does not say %s", msg, want)
			}
		}
		if strings.ContainsAny(msg, "\r\n") {
			t.Errorf("Run's error %q spans lines", msg)
		}
	})
}
