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
)

// rangeRefusal is a sarama member of group on c, consuming partition 0,
// whose claim opens a consumer of its own once armed (a redelivery's
// rewind, a new claim's move to its start offset): that consumer lists
// the partition's offset range (ListOffsets by OffsetNewest and
// OffsetOldest), which the cluster answers with an error code.
type rangeRefusal struct {
	c        *kfake.Cluster
	group    string
	armed    atomic.Bool  // set when the refusals may begin
	refused  atomic.Int32 // range listings refused once armed
	joins    atomic.Int32 // JoinGroup requests once armed
	l        *ledger
	done     <-chan error
	produced map[int32]int64
	// step names the open ("rewind", "move"), cause what armed the
	// refusals ("the record failed"), errWord what Run's error must say
	// ("rewind", "start offset").
	step, cause, errWord string
}

// refuseRanges answers each ListOffsets request of the offset range
// with code for every partition it names once r is armed, as long as
// refuse (called once per such request, on the cluster's loop) returns
// true, and counts the JoinGroup requests once armed. With armByTime, a
// listing by time (the claim's start lookup, answered) arms r.
func (r *rangeRefusal) refuseRanges(code *kerr.Error, refuse func() bool, armByTime bool) {
	c := r.c
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if armByTime && byTime(req) {
			r.armed.Store(true)
			return nil, nil, false
		}
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
}

// expectFailed checks that Run returns within 20s with an error wrapping
// want and the broker's error for code, naming the step and partition 0,
// having been refused once and having sent no JoinGroup since r armed.
func (r *rangeRefusal) expectFailed(t *testing.T, code *kerr.Error, want error) {
	t.Helper()
	var err error
	select {
	case err = <-r.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("Run did not return within 20s of the %s's refusal: the listing was refused %d times and the member joined %d times since",
			r.step, r.refused.Load(), r.joins.Load())
	}
	if brokerErr := saramaClient.brokerErr(code); !errors.Is(err, want) || !errors.Is(err, brokerErr) {
		t.Fatalf("Run = %v, want an error wrapping %v and %v", err, want, brokerErr)
	}
	if msg := err.Error(); !strings.Contains(msg, r.errWord) || !strings.Contains(msg, `"`+testTopic+`"/0`) {
		t.Fatalf("Run's error %q does not name the %s and the partition", msg, r.errWord)
	}
	if n, j := r.refused.Load(), r.joins.Load(); n != 1 || j != 0 {
		t.Fatalf("the listing was refused %d times and the member joined %d times after %s, want 1 and 0", n, j, r.cause)
	}
}

// expectRetried checks, once every record was handled (what says how),
// that the listing was refused refusals times, that the member sent no
// JoinGroup since r armed and its group is at generation epoch() (read
// then), and that
// Run has not returned.
func (r *rangeRefusal) expectRetried(t *testing.T, what string, refusals int32, epoch func() int32) {
	t.Helper()
	wait.Within(t, 30*time.Second, what, func() bool { return r.l.covers(r.produced) })
	if n := r.refused.Load(); n != refusals {
		t.Fatalf("the listing was refused %d times, want %d", n, refusals)
	}
	if j := r.joins.Load(); j != 0 {
		t.Fatalf("the member joined the group %d times after %s: the refusal made it rejoin", j, r.cause)
	}
	if gi := r.c.GroupInfo(r.group); gi == nil || gi.Epoch != epoch() {
		t.Fatalf("group %q is %+v once every record was handled, want generation %d: the refusal made the member rejoin", r.group, gi, epoch())
	}
	expectRunning(t, r.done, "after the "+r.step+" was refused with a retriable error")
}

// refuseTwice returns a refuse function that refuses the first two
// listings: the listing is sent once more after a metadata refresh when
// refused, so two refusals fail the first attempt.
func refuseTwice() (refuse func() bool, refusals int32) {
	var left atomic.Int32
	left.Store(2)
	return func() bool { return left.Add(-1) >= 0 }, 2
}
