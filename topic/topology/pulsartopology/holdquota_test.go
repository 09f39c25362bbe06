package pulsartopology_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: on the Pulsar backend, a retry whose hold is refused by a
// hold topic over a producer backlog quota (producer_exception: refused at
// once; producer_request_hold: held until each attempt's deadline) fails
// with ErrSend; the source keeps the letter (Stats.HandOffKept), neither
// lost nor dead-lettered, logs its first failure at ERROR and not one
// line per attempt, and hands it off again; once the quota clears the
// letter lands on the hold topic once and comes back from it once, its
// handler run once more.
func TestAHoldRefusedByAHoldTopicOverItsBacklogQuotaIsHeldOnceTheQuotaClears(t *testing.T) {
	for _, policy := range []string{"producer_exception", "producer_request_hold"} {
		t.Run(policy, func(t *testing.T) {
			br, lines, log, be := quotaBackend(t)
			declaredQ, err := be.Declare(ctxT(t), build(t, topology.New("quota-hold").Hold(faultHold).DLQ()))
			if err != nil {
				t.Fatal(err)
			}
			hold, dlq := holdTopic(be, declaredQ), dlqTopic(be, declaredQ)
			testbroker.PulsarSizeQuota(t, br, quotaLimit, policy)
			// The group's subscription on the hold topic over the quota:
			// a message due long after the test keeps its backlog there
			// however the group reads the topic.
			if _, err := br.Publish(ctxT(t), hold, pulsartest.Message{Payload: overQuota, DeliverAt: time.Now().Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			q := &countingQueues{Queues: declaredQ}
			src, runs := quotaPipeline(t, q, log, func(_, run int) error {
				if run == 1 {
					return topology.Retry(errors.New("gateway down"))
				}
				return nil
			})
			if err := declaredQ.Publish(ctxT(t), topology.Letter[int]{Value: 7}); err != nil {
				t.Fatal(err)
			}

			const attempts = 3
			// Refused several times, or the letter gone from the source
			// (its handler run again, or an outcome other than Retried).
			wait.Within(t, faultPatience, "the hold refused several times", func() bool {
				st := src.Stats()
				return q.failed.Load() >= attempts || runs(7) > 1 || st.Acked+st.DeadLettered+st.Discarded > 0
			}, func() string { return fmt.Sprintf("%d attempts failed, stats %+v", q.failed.Load(), src.Stats()) })
			if err := q.notSend(); err != nil {
				t.Errorf("a hold over the quota failed with %v, want an error wrapping ErrSend", err)
			}
			st := src.Stats()
			if st.HandOffKept != 1 || st.HandOffFailed != 1 || st.DeadLettered != 0 || st.Acked != 0 {
				t.Errorf("over the quota: HandOffKept %d, HandOffFailed %d, DeadLettered %d, Acked %d; want 1, 1, 0, 0",
					st.HandOffKept, st.HandOffFailed, st.DeadLettered, st.Acked)
			}
			if got := letters(br, hold); len(got) != 0 {
				t.Errorf("over the quota the hold topic holds letters %v, want none", got)
			}
			if n := runs(7); n != 1 {
				t.Errorf("over the quota the handler ran %d times, want 1", n)
			}
			if n := lines.Count("level=ERROR", handOffFailedLine); n != 1 {
				t.Errorf("%d ERROR lines %q after %d failed attempts, want 1:\n%s", n, handOffFailedLine, q.failed.Load(), strings.Join(lines.Matching(handOffFailedLine), "\n"))
			}

			testbroker.PulsarSizeQuota(t, br, 0, "")
			wait.Within(t, faultPatience, "the retry held and handled once the quota is removed", func() bool {
				st := src.Stats()
				return st.Acked == 1 && st.HandOffKept == 0
			}, func() string { return fmt.Sprintf("stats %+v, handler runs %d", src.Stats(), runs(7)) })
			st = src.Stats()
			if st.Retried != 1 || st.DeadLettered != 0 || st.HandOffFailed != 1 {
				t.Errorf("once the quota is removed: Retried %d, DeadLettered %d, HandOffFailed %d; want 1, 0, 1", st.Retried, st.DeadLettered, st.HandOffFailed)
			}
			if got := letters(br, hold); len(got) != 1 || got[0] != 7 {
				t.Errorf("the hold topic holds letters %v, want [7] once", got)
			}
			if got := letters(br, dlq); len(got) != 0 {
				t.Errorf("the DLQ holds letters %v, want none", got)
			}
			if n := runs(7); n != 2 {
				t.Errorf("the handler ran %d times, want 2: once, then once for the retry", n)
			}
		})
	}
}
