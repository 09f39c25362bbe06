package kafka_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: a sarama member whose joins keep failing (an error that is
// neither a refusal for good nor a missing topic) gives up with
// ErrConsume after 10 failed Consume calls in a row: not sooner, so that
// a passing fault does not fail Run, and not later.
func TestRunFailsWithErrConsumeAfterTenFailedJoinsInARow(t *testing.T) {
	const group = "g-consume-failures"
	c := newCluster(t, 1)
	refused := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.JoinGroup}, Group: group, TopLevel: true, Err: kerr.InvalidSessionTimeout, Count: -1})
	defer refused.Remove()
	o := sourceOptions(c, group)
	o.Config.Consumer.Group.Rebalance.Retry.Max = 0 // one JoinGroup per Consume call
	o.Config.Consumer.Group.Rebalance.Retry.Backoff = 10 * time.Millisecond
	err := runStage(t, newSource(t, o), 30*time.Second)
	if !errors.Is(err, kafka.ErrConsume) {
		t.Fatalf("Run = %v, want an error wrapping ErrConsume", err)
	}
	if got := refused.Hits(); got != 10 {
		t.Fatalf("Run failed after %d refused joins, want 10", got)
	}
}
