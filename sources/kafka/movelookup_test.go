package kafka_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// moveRefusal is a rangeRefusal whose new claim of partition 0 starts at
// a start time (OffsetTimestamp): once its start offset is listed by time
// (answered, which arms the refusals), the claim moves its consumer there.
type moveRefusal struct {
	rangeRefusal
	stop func()
}

// startMoveRefusal starts the member, its move's listings answered with
// code as long as refuse returns true (rangeRefusal.refuseRanges).
func startMoveRefusal(t *testing.T, group string, code *kerr.Error, refuse func() bool) *moveRefusal {
	t.Helper()
	c := newCluster(t, 1, kfake.NumBrokers(1))
	r := &moveRefusal{rangeRefusal: rangeRefusal{c: c, group: group, l: newLedger(), produced: produce(t, c, 1, 0, 10),
		step: "move", cause: "the start offset was listed", errWord: "start offset"}}
	r.refuseRanges(code, refuse, true)
	o := sourceOptions(c, group)
	o.InitialOffset, o.StartTime = kafka.OffsetTimestamp, time.Now().Add(-time.Hour)
	src := newSource(t, o)
	done := make(chan error, 1)
	opts := pipelineOpts("move-refused", src, 1, r.l, nil)
	opts.Producer.Source = onceSource{testSource: src, done: done}
	p := startPipeline(t, opts)
	var stopped atomic.Bool
	r.stop = func() {
		if stopped.CompareAndSwap(false, true) {
			stopPipeline(t, p)
		}
	}
	t.Cleanup(r.stop)
	r.done = done
	return r
}

// Guarantee: with the sarama source, a new claim's move to its start
// offset (its consumer starts elsewhere) whose offset range listing the
// cluster refuses with an error Kafka says not to retry ends the member:
// Run returns within a bound with an error wrapping ErrDenied (an
// authorization refusal) or ErrStartRefused (any other such error: the
// move applies the start offset) and the broker's error, naming the
// partition, so that the pipeline's restart policy decides, rather than
// the claim ending and the group rejoining one generation after another.
// The listing is refused once, and the member does not join again.
func TestRunFailsWhenTheMoveToTheStartOffsetIsRefusedForGood(t *testing.T) {
	for _, tc := range []struct {
		code *kerr.Error
		want error
	}{
		{kerr.TopicAuthorizationFailed, kafka.ErrDenied},
		{kerr.InvalidRequest, kafka.ErrStartRefused},
	} {
		t.Run(tc.code.Message, func(t *testing.T) {
			if kerr.IsRetriable(tc.code) {
				t.Fatalf("%v is retriable", tc.code)
			}
			startMoveRefusal(t, "g-move-refused", tc.code, func() bool { return true }).expectFailed(t, tc.code, tc.want)
		})
	}
}

// Guarantee: with the sarama source, a new claim's move to its start
// offset whose offset range listing the cluster refuses with an error
// Kafka says to retry (LEADER_NOT_AVAILABLE) is tried again within the
// claim, with backoff: the member does not fail and stays in its group
// generation (no rebalance disturbs the group), and every record from
// the start offset on is delivered.
func TestMoveToTheStartOffsetRefusedForNowIsRetriedWithinTheClaim(t *testing.T) {
	refuse, refusals := refuseTwice()
	r := startMoveRefusal(t, "g-move-retried", kerr.LeaderNotAvailable, refuse)
	r.expectRetried(t, "every record once the move is answered", refusals, func() int32 { return 1 })
}

// Guarantee: with the sarama source, a pipeline that stops while a new
// claim's move to its start offset waits to be tried again (the cluster
// keeps refusing it with an error Kafka says to retry) drains and stops
// within a bound: the retry ends with the drain, Run returns no error,
// and the member does not join the group again.
func TestPipelineStopsWhileTheMoveToTheStartOffsetIsRetried(t *testing.T) {
	r := startMoveRefusal(t, "g-move-drained", kerr.LeaderNotAvailable, func() bool { return true })
	wait.Within(t, 20*time.Second, "the move's first attempt to fail", func() bool { return r.refused.Load() >= 2 })
	start := time.Now()
	r.stop()
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the pipeline took %v to stop while the move was retried", took)
	}
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Run = %v, want nil once the pipeline stopped", err)
		}
	default:
		t.Fatal("Run had not returned once the pipeline stopped")
	}
	if j := r.joins.Load(); j != 0 {
		t.Fatalf("the member joined the group %d times after the start offset was listed", j)
	}
}
