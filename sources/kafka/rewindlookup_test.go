package kafka_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// rewindRefusal is a rangeRefusal whose handler fails record 5 of
// partition 0 once, with FailureRedeliver: the redelivery then rewinds
// the partition, and the record's failure arms the refusals.
type rewindRefusal struct {
	rangeRefusal
	epoch atomic.Int32 // the group's generation as the record failed
}

// startRewindRefusal starts the member, its rewind's listings answered
// with code as long as refuse returns true (rangeRefusal.refuseRanges).
func startRewindRefusal(t *testing.T, group string, code *kerr.Error, refuse func() bool) *rewindRefusal {
	t.Helper()
	c := newCluster(t, 1, kfake.NumBrokers(1))
	r := &rewindRefusal{rangeRefusal: rangeRefusal{c: c, group: group, l: newLedger(), produced: produce(t, c, 1, 0, 10),
		step: "rewind", cause: "the record failed", errWord: "rewind"}}
	r.refuseRanges(code, refuse, false)
	o := sourceOptions(c, group)
	o.FailurePolicy = kafka.FailureRedeliver
	src := newSource(t, o)
	var failed atomic.Bool
	opts := pipelineOpts("rewind-refused", src, 1, r.l, func(m *message.Message[[]byte]) error {
		if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Partition == 0 && md.Offset == 5 && failed.CompareAndSwap(false, true) {
			if gi := c.GroupInfo(group); gi != nil {
				r.epoch.Store(gi.Epoch)
			}
			r.armed.Store(true)
			return errors.New("fails once")
		}
		return nil
	})
	r.done = startOnce(t, opts, src)
	return r
}

// Guarantee: with the sarama source, a redelivery's rewind whose offset
// range listing the cluster refuses with an error Kafka says not to retry
// ends the member: Run returns within a bound with an error wrapping
// ErrDenied (an authorization refusal) or ErrRewindRefused (any other
// such error) and the broker's error, naming the partition, so that the
// pipeline's restart policy decides, rather than the claim ending and the
// group rejoining one generation after another, each rejoin disturbing
// every member of the group. The listing is refused once, and the member
// does not join again.
func TestRunFailsWhenTheRedeliveryRewindIsRefusedForGood(t *testing.T) {
	for _, tc := range []struct {
		code *kerr.Error
		want error
	}{
		{kerr.TopicAuthorizationFailed, kafka.ErrDenied},
		{kerr.InvalidRequest, kafka.ErrRewindRefused},
	} {
		t.Run(tc.code.Message, func(t *testing.T) {
			if kerr.IsRetriable(tc.code) {
				t.Fatalf("%v is retriable", tc.code)
			}
			startRewindRefusal(t, "g-rewind-refused", tc.code, func() bool { return true }).expectFailed(t, tc.code, tc.want)
		})
	}
}

// Guarantee: with the sarama source, a redelivery's rewind whose offset
// range listing the cluster refuses with an error Kafka says to retry
// (LEADER_NOT_AVAILABLE) is tried again within the claim, with backoff:
// the member does not fail and stays in its group generation (no
// rebalance disturbs the group), and the failed record is redelivered
// and handled.
func TestRedeliveryRewindRefusedForNowIsRetriedWithinTheClaim(t *testing.T) {
	refuse, refusals := refuseTwice()
	r := startRewindRefusal(t, "g-rewind-retried", kerr.LeaderNotAvailable, refuse)
	r.expectRetried(t, "every record, the failed one redelivered", refusals, r.epoch.Load)
}
