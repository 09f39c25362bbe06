package kafka_test

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// rewindRefusal is a sarama member whose handler fails record 5 of
// partition 0 once, with FailureRedeliver: the redelivery then rewinds
// the partition, whose consumer lists the partition's offset range
// (ListOffsets by OffsetNewest and OffsetOldest).
type rewindRefusal struct {
	c        *kfake.Cluster
	group    string
	armed    atomic.Bool  // set as the record fails
	refused  atomic.Int32 // listings refused once armed
	joins    atomic.Int32 // JoinGroup requests once armed
	epoch    atomic.Int32 // the group's generation as the record failed
	l        *ledger
	done     <-chan error
	produced map[int32]int64
}

// startRewindRefusal starts the member; once the record failed, each
// ListOffsets request of the offset range is answered with code for
// every partition it names, as long as refuse (called once per such
// request, on the cluster's loop) returns true.
func startRewindRefusal(t *testing.T, group string, code *kerr.Error, refuse func() bool) *rewindRefusal {
	t.Helper()
	c := newCluster(t, 1, kfake.NumBrokers(1))
	r := &rewindRefusal{c: c, group: group, l: newLedger(), produced: produce(t, c, 1, 0, 10)}
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		ranged := slices.ContainsFunc(req.(*kmsg.ListOffsetsRequest).Topics, func(rt kmsg.ListOffsetsRequestTopic) bool {
			return slices.ContainsFunc(rt.Partitions, func(rp kmsg.ListOffsetsRequestTopicPartition) bool { return rp.Timestamp < 0 })
		})
		if !ranged || !r.armed.Load() || !refuse() {
			return nil, nil, false
		}
		r.refused.Add(1)
		return testbroker.RefuseListOffsets(req, code.Code), nil, true
	})
	c.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if r.armed.Load() {
			r.joins.Add(1)
		}
		return nil, nil, false
	})
	o := sourceOptions(c, group)
	o.FailurePolicy = kafka.FailureRedeliver
	src := newSource(t, o)
	done := make(chan error, 1)
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
	opts.Producer.Source = onceSource{testSource: src, done: done}
	p := startPipeline(t, opts)
	t.Cleanup(func() { stopPipeline(t, p) })
	r.done = done
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
			r := startRewindRefusal(t, "g-rewind-refused", tc.code, func() bool { return true })
			var err error
			select {
			case err = <-r.done:
			case <-time.After(20 * time.Second):
				t.Fatalf("Run did not return within 20s of the rewind's refusal: the listing was refused %d times and the member joined %d times since",
					r.refused.Load(), r.joins.Load())
			}
			if brokerErr := saramaClient.brokerErr(tc.code); !errors.Is(err, tc.want) || !errors.Is(err, brokerErr) {
				t.Fatalf("Run = %v, want an error wrapping %v and %v", err, tc.want, brokerErr)
			}
			if msg := err.Error(); !strings.Contains(msg, "rewind") || !strings.Contains(msg, `"`+testTopic+`"/0`) {
				t.Fatalf("Run's error %q does not name the rewind and the partition", msg)
			}
			if n, j := r.refused.Load(), r.joins.Load(); n != 1 || j != 0 {
				t.Fatalf("the listing was refused %d times and the member joined %d times after the record failed, want 1 and 0", n, j)
			}
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
	// The listing is sent once more after a metadata refresh when
	// refused: two refusals fail the first attempt.
	const refusals = 2
	var left atomic.Int32
	left.Store(refusals)
	group := "g-rewind-retried"
	r := startRewindRefusal(t, group, kerr.LeaderNotAvailable, func() bool { return left.Add(-1) >= 0 })
	wait.Within(t, 30*time.Second, "every record, the failed one redelivered", func() bool { return r.l.covers(r.produced) })
	if n := r.refused.Load(); n != refusals {
		t.Fatalf("the listing was refused %d times, want %d", n, refusals)
	}
	if j := r.joins.Load(); j != 0 {
		t.Fatalf("the member joined the group %d times after the record failed: the refusal made it rejoin", j)
	}
	if gi := r.c.GroupInfo(group); gi == nil || gi.Epoch != r.epoch.Load() {
		t.Fatalf("group %q is %+v once every record was handled, want generation %d: the refusal made the member rejoin", group, gi, r.epoch.Load())
	}
	select {
	case err := <-r.done:
		t.Fatalf("Run = %v after the rewind was refused with a retriable error", err)
	default:
	}
}
