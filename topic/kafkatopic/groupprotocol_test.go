package kafkatopic_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// Guarantee: a balanced Subscribe whose consumer group is held by members
// that offer none of sarama's strategies (a franz-go consumer on its
// default, cooperative-sticky, of the same group id) fails within
// AdminTimeout with an error wrapping ErrJoin and sarama's
// ErrInconsistentGroupProtocol that names the group, rather than waiting
// for partitions the group never assigns.
func TestABalancedSubscribeRefusedForTheGroupsStrategiesFailsNamingTheGroup(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions(c, topic.IntCodec{})
	o.AdminTimeout = 5 * time.Second
	b := newBackend(t, o)
	const name = "mismatch"
	h := newTopic(t, b, name, topic.Options{})
	gid := kafkatopic.GroupID(name, "g")

	testbroker.GroupMember(t, c, gid, kafkatopic.KafkaTopic(name), kgo.CooperativeStickyBalancer())

	start := time.Now()
	s, err := h.Subscribe(ctxT(t), topic.Balanced("g"), topic.SubscriberOptions{})
	if err == nil {
		s.Close()
		t.Fatal("Subscribe to a group whose members offer none of sarama's strategies succeeded")
	}
	if !errors.Is(err, kafkatopic.ErrJoin) || !errors.Is(err, sarama.ErrInconsistentGroupProtocol) {
		t.Fatalf("Subscribe = %v, want an error wrapping ErrJoin and sarama.ErrInconsistentGroupProtocol", err)
	}
	if !strings.Contains(err.Error(), `group "`+gid+`"`) {
		t.Errorf("Subscribe's error %q does not name group %q", err, gid)
	}
	if took := time.Since(start); took > o.AdminTimeout+5*time.Second {
		t.Errorf("Subscribe returned after %v, want about AdminTimeout (%v)", took, o.AdminTimeout)
	}
}
