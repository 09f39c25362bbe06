package kafkatopic_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// masked is what a redacted credential reads as.
const masked = "[redacted]"

// Guarantee: a group session that fails with an error holding a credential
// (here a coordinator naming a protocol that echoes the SASL password)
// logs it redacted, and the Subscribe that gives up waiting for
// partitions returns it redacted, still wrapping ErrJoin.
func TestAFailedGroupSessionShowsNoCredentialInLogsOrErrors(t *testing.T) {
	c := testbroker.Kafka(t, kfake.EnableSASL(), kfake.Superuser(sarama.SASLTypePlaintext, saslUser, saslPassword))
	var logs logBuffer
	o := saslOptions(c, saslPassword, &logs)
	o.AdminTimeout = 3 * time.Second
	b := newBackend(t, o)
	h := newTopic(t, b, "jobs", topic.Options{})
	// Every join is accepted with a protocol the member does not know: the
	// session fails with an error naming it.
	c.ControlKey(int16(kmsg.JoinGroup), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.JoinGroupRequest)
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		proto := "range-" + saslPassword
		resp.Generation = 1
		resp.Protocol = &proto
		resp.ProtocolType = &req.ProtocolType
		resp.LeaderID = "another-member"
		resp.MemberID = "this-member"
		return resp, nil, true
	})
	_, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
	if !errors.Is(err, kafkatopic.ErrJoin) {
		t.Fatalf("Subscribe = %v, want ErrJoin", err)
	}
	if msg := err.Error(); strings.Contains(msg, saslPassword) || !strings.Contains(msg, "range-"+masked) {
		t.Fatalf("Subscribe = %q, want the session's error with the password redacted", msg)
	}
	if l := logs.String(); strings.Contains(l, saslPassword) || !strings.Contains(l, "range-"+masked) {
		t.Fatalf("logs = %s, want the session's error logged with the password redacted", l)
	}
}

// errRefused is the error of refusingValue's encoding.
var errRefused = errors.New("value refused")

// refusingValue is a record value whose encoding fails with an error
// naming the SASL password.
type refusingValue struct{}

func (refusingValue) Encode() ([]byte, error) {
	return nil, errors.Join(errRefused, errors.New("token "+saslPassword))
}
func (refusingValue) Length() int { return 1 }

// refuseValue is a producer interceptor that swaps each record's value for
// a refusingValue.
type refuseValue struct{}

func (refuseValue) OnSend(m *sarama.ProducerMessage) { m.Value = refusingValue{} }

// Guarantee: a publish the producer fails with an error holding a
// credential returns it redacted, still wrapping the producer's error.
func TestAFailedPublishShowsNoCredentialInItsError(t *testing.T) {
	c := testbroker.Kafka(t, kfake.EnableSASL(), kfake.Superuser(sarama.SASLTypePlaintext, saslUser, saslPassword))
	var logs logBuffer
	o := saslOptions(c, saslPassword, &logs)
	o.Config.Producer.Interceptors = []sarama.ProducerInterceptor{refuseValue{}}
	b := newBackend(t, o)
	h := newTopic(t, b, "jobs", topic.Options{})
	err := h.Publish(ctxT(t), "x")
	if !errors.Is(err, errRefused) {
		t.Fatalf("Publish = %v, want the producer's error", err)
	}
	if msg := err.Error(); strings.Contains(msg, saslPassword) || !strings.Contains(msg, "token "+masked) {
		t.Fatalf("Publish = %q, want the producer's error with the password redacted", msg)
	}
}
