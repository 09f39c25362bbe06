package kafka_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// deleteRecordsBefore deletes the records of the test topic's partitions
// before offs, as retention (or a DeleteRecords request, whose code the
// cluster runs) would: each partition's log then starts at its offset.
func deleteRecordsBefore(t *testing.T, c *kfake.Cluster, offs map[int32]int64) {
	t.Helper()
	for p, o := range offs {
		if err := c.DeleteRecords(testTopic, p, o); err != nil {
			t.Fatalf("deleting the records of partition %d before %d: %v", p, o, err)
		}
	}
}

// startBelowLogStart makes a cluster whose one partition holds records 0
// to 9, of which retention deleted those before 5, and where group
// committed offset 2, below the log start. It returns the options of a
// source of group on it and a count of the joins the cluster is sent (the
// JoinGroup requests with a member id). The source's session lasts 15 s:
// the tests count joins, and a busy machine's stall of a 2 s session would
// end the member's session and make it join again.
func startBelowLogStart(t *testing.T, group string) (kafka.Options, *kfake.FaultHandle) {
	t.Helper()
	c := newCluster(t, 1, kfake.NumBrokers(1))
	produce(t, c, 1, 0, 10)
	commitOutside(t, c, group, map[int32]int64{0: 2})
	deleteRecordsBefore(t, c, map[int32]int64{0: 5})
	// A member joins with a second JoinGroup request, which carries the
	// member id the first one was refused for (MEMBER_ID_REQUIRED).
	joins := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.JoinGroup}, Count: -1, Observe: true, When: func(req kmsg.Request) bool {
		return req.(*kmsg.JoinGroupRequest).MemberID != ""
	}})
	t.Cleanup(joins.Remove)
	o := sourceOptions(c, group)
	o.Config.Consumer.Group.Session.Timeout = 15 * time.Second
	return o, joins
}

// Guarantee: with the sarama source and
// Config.Consumer.Group.ResetInvalidOffsets false, a committed offset that
// retention deleted (below the partition's log start) ends the member
// once: Run returns within a bound with an error wrapping
// ErrOffsetOutOfRange and sarama.ErrOffsetOutOfRange, starting with
// "kafka:" and naming the partition and the offset, so that the source's
// failure policy decides, rather than the member's claim failing to open
// and the member rejoining the group over and over.
func TestRunFailsOnceWhenTheCommittedOffsetIsOutOfRangeAndNotToBeReset(t *testing.T) {
	group := "g-out-of-range"
	o, joins := startBelowLogStart(t, group)
	o.Config.Consumer.Group.ResetInvalidOffsets = false
	err := runStage(t, saramaClient.new(t, o), 20*time.Second)
	if !errors.Is(err, kafka.ErrOffsetOutOfRange) || !errors.Is(err, sarama.ErrOffsetOutOfRange) {
		t.Fatalf("Run = %v, want an error wrapping %v and %v", err, kafka.ErrOffsetOutOfRange, sarama.ErrOffsetOutOfRange)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "kafka:") || !strings.Contains(msg, `"`+testTopic+`"/0`) || !strings.Contains(msg, "offset 2") {
		t.Fatalf("Run's error %q does not start with kafka: and name the partition and offset 2", msg)
	}
	if n := joins.Hits(); n > 2 {
		t.Fatalf("the member joined the group %d times", n)
	}
}

// Guarantee: a committed offset that retention deleted starts the
// partition at InitialOffset, with sarama's default
// (Consumer.Group.ResetInvalidOffsets) and with the franz-go source, which
// has no setting to keep it: the member does not fail, does not rejoin,
// and delivers the records the partition still holds.
func TestCommittedOffsetBelowTheLogStartStartsAtInitialOffset(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		group := "g-below-log-start"
		o, joins := startBelowLogStart(t, group)
		l := newLedger()
		done := runOnceInto(t, "below-log-start", cl.new(t, o), l)
		wait.Within(t, 20*time.Second, "the records after the log start", func() bool {
			for o := int64(5); o < 10; o++ {
				if !l.handled(rec{0, o}) {
					return false
				}
			}
			return true
		})
		expectRunning(t, done, "after starting below the log start")
		if n := joins.Hits(); n > 1 {
			t.Fatalf("the member joined the group %d times", n)
		}
	})
}
