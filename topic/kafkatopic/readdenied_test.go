package kafkatopic_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/readertest"
)

// expectDeniedReadDegradesUntilGrantedBack runs a pipeline reading topic
// "denied" through a subscriber in mode and takes READ on the topic away
// from the backend's user while it runs: the stage is degraded, with one
// WARN line, and a reason wrapping sarama.ErrTopicAuthorizationFailed that
// names the topic without the password; once READ is granted back it runs
// again in the same run (no restart), with one INFO line, and handles the
// message published while it was denied as well as the others.
func expectDeniedReadDegradesUntilGrantedBack(t *testing.T, mode topic.SubscriptionMode) {
	k := testbroker.KafkaWithACLs(t)
	o := testOptions[int](k.Cluster, topic.IntCodec{})
	o.Config = k.Config()
	var lines logtest.Lines
	log := slog.New(slog.NewTextHandler(&lines, nil))
	o.Logger = log
	h := newTopic(t, newBackend(t, o), "denied", topic.Options{Mode: topic.Mixed})
	r := readertest.Start(t, "denied", h, mode, log)
	state := func() string { return r.String() + "\n" + strings.Join(lines.All(), "\n") }
	if err := h.Publish(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, patience, "the message published before the denial", func() bool {
		return r.Handled() == 1 && r.Status().State == producer.StateRunning
	}, state)

	k.Deny(t, "denied", sarama.AclOperationRead)
	if err := h.Publish(ctxT(t), 2); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, patience, "the stage degraded", func() bool { return r.Status().State == producer.StateDegraded }, state)
	st := r.Status()
	if err := st.LastError; !errors.Is(err, sarama.ErrTopicAuthorizationFailed) || !strings.Contains(err.Error(), "denied") ||
		strings.Contains(err.Error(), k.Password) {
		t.Fatalf("LastError = %v, want an error wrapping sarama.ErrTopicAuthorizationFailed naming topic \"denied\", without the password", err)
	}

	k.Grant(t, "denied", sarama.AclOperationRead)
	wait.Within(t, patience, "the message published while denied, and the stage running", func() bool {
		return r.Handled() == 2 && r.Status().State == producer.StateRunning
	}, state)
	if err := h.Publish(ctxT(t), 3); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, patience, "the message published once granted back", func() bool { return r.Handled() == 3 }, state)
	if st := r.Status(); st.State != producer.StateRunning || st.Restarts != 0 {
		t.Fatalf("status %+v, want running in the first run", st)
	}
	if d, rec := lines.Count("WARN", producer.DegradedLog), lines.Count("INFO", producer.RecoveredLog); d != 1 || rec != 1 {
		t.Fatalf("%d degraded and %d recovered lines, want 1 each:\n%s", d, rec, strings.Join(lines.All(), "\n"))
	}
}

// Guarantee: a balanced subscriber whose user an ACL change denies READ
// on its topic while it runs has its stage degraded at the first refused
// fetch, the refusal as the reason, until READ is granted back; it then
// reads on, with no restart and nothing lost.
func TestABalancedSubscriberDeniedReadIsDegradedUntilGrantedBack(t *testing.T) {
	expectDeniedReadDegradesUntilGrantedBack(t, topic.Balanced("g"))
}

// Guarantee: a broadcast subscriber whose user an ACL change denies READ
// on its topic while it runs has its stage degraded at the first refused
// fetch, the refusal as the reason, until READ is granted back; it then
// reads on, with no restart and nothing lost.
func TestABroadcastSubscriberDeniedReadIsDegradedUntilGrantedBack(t *testing.T) {
	expectDeniedReadDegradesUntilGrantedBack(t, topic.Broadcast())
}
