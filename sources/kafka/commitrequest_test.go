package kafka_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// commitAll handles every record of a one-partition topic with a source
// whose options set changes, stops it, checks that everything handled was
// committed, and returns the OffsetCommit requests its member sent.
func commitAll(t *testing.T, group string, set func(*kafka.Options)) []commitRequest {
	t.Helper()
	c := newCluster(t, 1)
	ends := produce(t, c, 1, 0, 20)
	reqs := recordCommits(c, group)
	opts := sourceOptions(c, group)
	set(&opts)
	l := newLedger()
	p := startPipeline(t, pipelineOpts("requests", newSource(t, opts), 1, l, nil))
	wait.Within(t, 20*time.Second, "every record handled", func() bool { return l.covers(ends) })
	stopPipeline(t, p)
	if got := committed(c, group); !equalOffsets(got, ends) {
		t.Fatalf("committed %v after the source stopped, want %v", got, ends)
	}
	reqs.mu.Lock()
	defer reqs.mu.Unlock()
	got := reqs.reqs
	if len(got) == 0 {
		t.Fatal("no OffsetCommit request reached the broker")
	}
	return got
}

// Guarantee: the source's commits keep the group's offsets for
// Config.Consumer.Offsets.Retention, as sarama's own commits would, on the
// request versions that carry a retention time; without one they ask for
// the broker's default (-1).
func TestCommitsCarryTheConfiguredRetention(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retention time.Duration
		want      int64
	}{
		{"configured", 48 * time.Hour, (48 * time.Hour).Milliseconds()},
		{"broker default", 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs := commitAll(t, "g-retention", func(o *kafka.Options) {
				o.Config.Version = sarama.V2_0_0_0 // OffsetCommit v4: the last with a retention time
				o.Config.Consumer.Offsets.Retention = tc.retention
			})
			for _, r := range reqs {
				if r.version != 4 || r.retention != tc.want {
					t.Fatalf("OffsetCommit v%d with retention %dms, want v4 with %dms", r.version, r.retention, tc.want)
				}
			}
		})
	}
}

// Guarantee: a member with a static group instance id
// (Config.Consumer.Group.InstanceId) names it on its commits, as the
// broker expects of a static member.
func TestCommitsCarryTheGroupInstanceID(t *testing.T) {
	reqs := commitAll(t, "g-instance", func(o *kafka.Options) {
		o.Config.Version = sarama.V2_3_0_0 // OffsetCommit v7: the first with an instance id
		o.Config.Consumer.Group.InstanceId = "billing-0"
	})
	for _, r := range reqs {
		if r.instance == nil || *r.instance != "billing-0" {
			t.Fatalf("OffsetCommit v%d with instance id %v, want %q", r.version, r.instance, "billing-0")
		}
	}
}

// Guarantee: a released partition's final commit that the broker refuses
// is sent again, up to Config.Consumer.Offsets.Retry.Max times, so one
// refusal does not leave the partition's handled records to its next
// owner.
func TestFinalCommitIsRetriedUpToRetryMax(t *testing.T) {
	const group = "g-final-retry"
	c := newCluster(t, 1)
	ends := produce(t, c, 1, 0, 20)
	opts := sourceOptions(c, group)
	opts.CommitInterval = time.Hour // only the final commit commits
	opts.Config.Consumer.Offsets.Retry.Max = 1
	l := newLedger()
	p := startPipeline(t, pipelineOpts("final-retry", newSource(t, opts), 1, l, nil))
	wait.Within(t, 20*time.Second, "every record handled", func() bool { return l.covers(ends) })
	refused := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: group, Err: kerr.CoordinatorLoadInProgress, Count: 1})
	defer refused.Remove()
	stopPipeline(t, p)
	if refused.Hits() != 1 {
		t.Fatalf("the final commit was refused %d times, want 1", refused.Hits())
	}
	if got := committed(c, group); !equalOffsets(got, ends) {
		t.Fatalf("committed %v after one refused final commit and Retry.Max 1, want %v", got, ends)
	}
}

// Guarantee: an OffsetCommit answer that leaves out a partition the
// request carried is not taken as that partition committed: Stats keeps
// its committed offset and counts a failed commit, and the offset goes
// out again with the next commit.
func TestCommitAnswerWithoutAPartitionIsNotTakenAsCommitted(t *testing.T) {
	const group = "g-incomplete"
	c := newCluster(t, 1)
	ends := produce(t, c, 1, 0, 20)
	var mu sync.Mutex
	incomplete := true
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if !incomplete || req.(*kmsg.OffsetCommitRequest).Group != group {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Version = req.GetVersion()
		return resp, nil, true // no topic: nothing committed
	})
	opts := sourceOptions(c, group)
	src := newSource(t, opts)
	l := newLedger()
	p := startPipeline(t, pipelineOpts("incomplete", src, 1, l, nil))
	wait.Within(t, 20*time.Second, "every record handled", func() bool { return l.covers(ends) })
	wait.Within(t, 10*time.Second, "a failed commit counted", func() bool {
		ms := src.Stats().Members
		return len(ms) == 1 && ms[0].CommitErrors > 0
	})
	ms := src.Stats().Members[0]
	if !errors.Is(ms.LastCommitError, sarama.ErrIncompleteResponse) {
		t.Fatalf("last commit error %v, want sarama.ErrIncompleteResponse", ms.LastCommitError)
	}
	for _, ps := range ms.Partitions {
		if ps.Committed >= 0 {
			t.Fatalf("partition %d reported committed at %d while the broker has %v", ps.Partition, ps.Committed, committed(c, group))
		}
	}
	mu.Lock()
	incomplete = false
	mu.Unlock()
	wait.Within(t, 10*time.Second, "the offsets committed once answers are whole", func() bool { return equalOffsets(committed(c, group), ends) })
	stopPipeline(t, p)
}
