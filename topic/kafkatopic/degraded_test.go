package kafkatopic_test

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/readertest"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// Guarantee: a pipeline reading a Kafka topic through topic/source, as a
// balanced member or as a broadcast subscriber, has its stage degraded
// while the cluster cannot be reached, with the client's error as
// LastError, and running again once the cluster answers, within the same
// run (no restart); every message published before and after the
// outage is handled. How long each change takes is logged, not bounded
// (docs/testing.md).
func TestTopicSourceIsDegradedWhileTheClusterIsOutOfReach(t *testing.T) {
	for name, mode := range readertest.Modes() {
		t.Run(name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			o := testOptions[int](c, topic.IntCodec{})
			o.Partitions = 2
			o.Key = func(v int) []byte { return []byte(fmt.Sprint(v)) }
			b := newBackend(t, o)
			h := newTopic(t, b, "outage", topic.Options{Mode: topic.Mixed})
			r := readertest.Start(t, "outage", h, mode, slog.New(slog.DiscardHandler))
			status, state := r.Status, r.String
			const n = 20
			for v := range n / 2 {
				if err := h.Publish(ctxT(t), v); err != nil {
					t.Fatal(err)
				}
			}
			wait.Within(t, patience, "the messages published before the outage", func() bool {
				return r.Handled() == n/2 && status().State == producer.StateRunning
			}, state)

			down := time.Now()
			var st producer.StageStatus
			testbroker.OutOfReach(t, c, "the stage degraded", func() bool {
				st = status()
				return st.State == producer.StateDegraded
			}, state)
			t.Logf("degraded %v after the cluster went out of reach: %v", st.Since.Sub(down).Round(time.Millisecond), st.LastError)
			if st.LastError == nil || st.Restarts != 0 {
				t.Fatalf("status %+v, want degraded with an error, in the first run", st)
			}

			back := time.Now()
			wait.Within(t, patience, "the stage running again", func() bool { return status().State == producer.StateRunning }, state)
			st = status()
			t.Logf("running %v after the cluster answered again", st.Since.Sub(back).Round(time.Millisecond))
			if st.Restarts != 0 {
				t.Fatalf("status %+v, want the first run still", st)
			}
			for v := n / 2; v < n; v++ {
				if err := h.Publish(ctxT(t), v); err != nil {
					t.Fatal(err)
				}
			}
			wait.Within(t, patience, "every message handled", func() bool { return r.Handled() == n }, state)
		})
	}
}

// refuseJoins makes c refuse the JoinGroup requests while the returned
// count is positive, each refusal taking one off, with
// GROUP_AUTHORIZATION_FAILED, an error sarama does not retry: the
// member's group session fails. kick, once set, has c answer the next
// Heartbeat with REBALANCE_IN_PROGRESS, which ends the member's session
// and sends it to join again.
func refuseJoins(c *kfake.Cluster) (refusals *atomic.Int32, kick *atomic.Bool) {
	refusals, kick = new(atomic.Int32), new(atomic.Bool)
	c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if refusals.Add(-1) < 0 {
			refusals.Add(1)
			return nil, nil, false
		}
		resp := req.(*kmsg.JoinGroupRequest).ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !kick.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		resp := req.(*kmsg.HeartbeatRequest).ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp, nil, true
	})
	return refusals, kick
}

// Guarantee: a balanced member's stage is not degraded by one group
// session that fails (a rebalance the coordinator refuses once), while
// the cluster answers everything else; it is degraded by the second
// failed session in a row, with the group's refusal as LastError, and
// runs again, within the same run, once a session starts.
func TestTopicSourceIsDegradedOnlyBySessionsThatKeepFailing(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	var sessions, lines logtest.Lines
	o.Logger = slog.New(slog.NewTextHandler(&sessions, nil))
	b := newBackend(t, o)
	h := newTopic(t, b, "refused", topic.Options{})
	r := readertest.Start(t, "refused", h, topic.Balanced("g"), slog.New(slog.NewTextHandler(&lines, nil)))
	status, state := r.Status, r.String
	wait.Within(t, patience, "the stage running", func() bool { return status().State == producer.StateRunning }, state)
	wait.Within(t, patience, "the first session's line", func() bool { return sessions.Count(kafkatopic.SessionStartedLog) == 1 })
	refusals, kick := refuseJoins(c)

	refusals.Store(1)
	kick.Store(true)
	wait.Within(t, patience, "a session started after a refused one", func() bool {
		return sessions.Count("consumer group session failed") == 1 && sessions.Count(kafkatopic.SessionStartedLog) == 2
	}, state)
	if st := status(); st.State != producer.StateRunning || lines.Count(producer.DegradedLog) != 0 {
		t.Fatalf("status %+v, %d degraded lines, after one failed session: want running and none", st, lines.Count(producer.DegradedLog))
	}

	refusals.Store(1 << 20)
	kick.Store(true)
	wait.Within(t, patience, "the stage degraded", func() bool { return status().State == producer.StateDegraded }, state)
	if st := status(); !errors.Is(st.LastError, sarama.ErrGroupAuthorizationFailed) || st.Restarts != 0 {
		t.Fatalf("status %+v, want degraded by the group's refusal in the first run", st)
	}
	refusals.Store(0)
	wait.Within(t, patience, "the stage running again", func() bool { return status().State == producer.StateRunning }, state)
	if st := status(); st.Restarts != 0 {
		t.Fatalf("status %+v, want the first run still", st)
	}
}

// Guarantee: fetches whose connections drop, while the cluster answers
// every other request, do not degrade the stage of a balanced member or
// of a broadcast subscriber: the client retries them, and only a client
// that reaches no broker (or, for a member, sessions that keep failing)
// says that the subscription cannot read.
func TestTopicSourceIsNotDegradedByFetchesThatFailWhileTheClusterAnswers(t *testing.T) {
	for name, mode := range readertest.Modes() {
		t.Run(name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			b := newBackend(t, testOptions[int](c, topic.IntCodec{}))
			h := newTopic(t, b, "fetches", topic.Options{Mode: topic.Mixed})
			var lines logtest.Lines
			r := readertest.Start(t, "fetches", h, mode, slog.New(slog.NewTextHandler(&lines, nil)))
			wait.Within(t, patience, "the stage running", func() bool { return r.Status().State == producer.StateRunning }, r.String)
			f := testbroker.Inject(c, kmsg.Fetch, 0, nil)
			f.Every(1)
			wait.Within(t, patience, "20 fetches dropped", func() bool { return f.Failed() >= 20 }, r.String)
			f.Every(0)
			if st := r.Status(); st.State != producer.StateRunning || lines.Count(producer.DegradedLog) != 0 {
				t.Fatalf("status %+v, %d degraded lines, after fetches dropped: want running and none", st, lines.Count(producer.DegradedLog))
			}
			if err := h.Publish(ctxT(t), 1); err != nil {
				t.Fatal(err)
			}
			wait.Within(t, patience, "the message handled", func() bool { return r.Handled() == 1 }, r.String)
		})
	}
}

// Guarantee: a balanced member's Reach observer that panics or ends its
// goroutine, on the backend's goroutines, costs an error line each time:
// the member goes on, runs its next session and receives what is
// published.
func TestAReachObserverThatPanicsOrExitsLeavesTheSubscriptionReading(t *testing.T) {
	c, h, lines := newLoggingTopic(t, "reach")
	obs := &readertest.MisbehavingReach{}
	s, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{Reach: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	refusals, kick := refuseJoins(c)
	refusals.Store(1 << 20)
	kick.Store(true) // the session ends, and the next ones fail
	wait.Within(t, patience, "a degrade reported", func() bool { return obs.Degrades.Load() > 0 })
	refusals.Store(0)
	wait.Within(t, patience, "a recovery reported", func() bool { return obs.Recoveries.Load() > 0 })
	if err := h.Publish(ctxT(t), 7); err != nil {
		t.Fatal(err)
	}
	it, err := s.Receive(ctxT(t))
	if err != nil || it.Value != 7 {
		t.Fatalf("Receive after the observer misbehaved = %+v, %v; want 7", it, err)
	}
	if lines.Count("Reach observer panicked") == 0 || lines.Count("Reach observer ended its goroutine") == 0 {
		t.Fatalf("want error lines for the panic and the exit, got %q", lines.All())
	}
}

// newLoggingTopic returns a cluster and the int topic name on a backend
// of it that logs as text to the returned lines.
func newLoggingTopic(t *testing.T, name topic.Name) (*kfake.Cluster, *topic.Handle[int], *logtest.Lines) {
	t.Helper()
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	var lines logtest.Lines
	o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
	return c, newTopic(t, newBackend(t, o), name, topic.Options{}), &lines
}
