package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/kafka/franz"
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
		mine := foreignMember(t, c, cl, group)

		o := sourceOptions(c, group)
		o.Rebalance = mine // each client's default, which the tests' franz options replace with range
		err := runStage(t, cl.new(t, o), 60*time.Second)
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

// Guarantee: a source refused by a group whose running members offer none
// of its strategies logs one WARN line per run of refusals (one per Run,
// not one per join it retries), the stage claims no partition, and the
// pipeline's restart policy gives the stage up with an error wrapping
// ErrGroupProtocol, rather than the member joining again for ever.
func TestARefusedJoinIsLoggedOncePerRunAndGivenUpByTheRestartPolicy(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const group = "g-refused-runs"
		c := newCluster(t, 2)
		mine := foreignMember(t, c, cl, group)

		book := newLogBook()
		o := sourceOptions(c, group)
		o.Rebalance = mine
		o.Logger = book.logger()
		src := cl.new(t, o)
		p := startPipeline(t, pipelineOpts("refused-runs", src, 1, newLedger(), nil))
		defer func() { _ = p.Stop(context.Background()) }() // returns the RestartError checked below
		status := func() producer.StageStatus { return p.SourceStatus()[0] }
		wait.Within(t, 60*time.Second, "the stage degraded by the refusals", func() bool {
			st := status()
			return st.State == producer.StateDegraded && errors.Is(st.LastError, kafka.ErrGroupProtocol)
		}, func() string { return fmt.Sprintf("%+v", status()) })
		for _, m := range src.Stats().Members {
			if len(m.Partitions) != 0 {
				t.Errorf("member %+v claims partitions while the group refuses it", m)
			}
		}
		select {
		case <-p.Done():
		case <-time.After(2 * time.Minute):
			t.Fatal("the pipeline has not given up after 2m")
		}
		var re *producer.RestartError
		if !errors.As(p.Err(), &re) || !errors.Is(re, kafka.ErrGroupProtocol) {
			t.Fatalf("pipeline error %v, want a RestartError wrapping ErrGroupProtocol", p.Err())
		}
		warned := book.find(func(r logRecord) bool {
			return r.Level >= slog.LevelWarn && strings.HasPrefix(r.Msg, "kafka ") && strings.Contains(r.Text, kafka.ErrGroupProtocol.Error())
		})
		if len(warned) != re.ConsecutiveFailures {
			t.Fatalf("%d WARN lines of the refusal over %d runs, want one per run: %v", len(warned), re.ConsecutiveFailures, warned)
		}
		if !strings.Contains(warned[0].Text, `group "`+group+`"`) || !strings.Contains(warned[0].Text, "set Rebalance") {
			t.Errorf("the refusal's line %q does not name the group and what to set", warned[0].Text)
		}
	})
}

// Guarantee: a member with strategies the running source's group does not
// offer is refused (INCONSISTENT_GROUP_PROTOCOL), and the source goes on
// unaffected: same group generation, the same partitions, its stage
// running in its first run, every record produced meanwhile handled.
func TestAForeignMemberRefusedByTheGroupLeavesTheSourceConsuming(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const group = "g-kept"
		c := newCluster(t, 2)
		o := sourceOptions(c, group)
		other := kgo.CooperativeStickyBalancer()
		if cl.name == franzClient.name {
			o.Rebalance = "cooperative-sticky"
			other = kgo.RangeBalancer()
		}
		src := cl.new(t, o)
		l := newLedger()
		produced := produce(t, c, 2, 0, 10)
		p := startPipeline(t, pipelineOpts("kept", src, 1, l, nil))
		defer stopPipeline(t, p)
		wait.Within(t, 30*time.Second, "the records before the foreign member", func() bool { return l.covers(produced) })
		claims := func() int {
			n := 0
			for _, m := range src.Stats().Members {
				n += len(m.Partitions)
			}
			return n
		}
		wait.Within(t, 30*time.Second, "both partitions claimed", func() bool { return claims() == 2 })
		gi := c.GroupInfo(group)
		if gi == nil || gi.State != "Stable" {
			t.Fatalf("group %q is %+v, want Stable", group, gi)
		}
		epoch := gi.Epoch

		foreign, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(testTopic), kgo.Balancers(other))
		if err != nil {
			t.Fatal(err)
		}
		defer foreign.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var refused error
		for refused == nil && ctx.Err() == nil {
			foreign.PollFetches(ctx).EachError(func(_ string, _ int32, err error) {
				if errors.Is(err, kerr.InconsistentGroupProtocol) {
					refused = err
				}
			})
		}
		if refused == nil {
			t.Fatalf("the foreign member was not refused with INCONSISTENT_GROUP_PROTOCOL within 30s")
		}

		for part, n := range produce(t, c, 2, 10, 10) {
			produced[part] += n
		}
		wait.Within(t, 30*time.Second, "the records after the foreign member was refused", func() bool { return l.covers(produced) })
		if gi := c.GroupInfo(group); gi == nil || gi.Epoch != epoch {
			t.Fatalf("group %q is %+v after the foreign member was refused, want generation %d", group, gi, epoch)
		}
		if n := claims(); n != 2 {
			t.Fatalf("the source claims %d partitions after the foreign member was refused, want 2", n)
		}
		if st := p.SourceStatus()[0]; st.State != producer.StateRunning || st.Restarts != 0 {
			t.Fatalf("stage %+v after the foreign member was refused, want running in its first run", st)
		}
	})
}

// foreignMember joins group on c first with a plain franz-go client that
// offers a strategy the members of cl do not by default (range against
// franz-go's cooperative-sticky, cooperative-sticky against sarama's
// range; testbroker.GroupMember), and returns cl's default strategy.
func foreignMember(t *testing.T, c *kfake.Cluster, cl client, group string) (mine string) {
	t.Helper()
	other, mine := kgo.CooperativeStickyBalancer(), "range"
	if cl.name == franzClient.name {
		other, mine = kgo.RangeBalancer(), "cooperative-sticky"
	}
	testbroker.GroupMember(t, c, group, testTopic, other)
	return mine
}
