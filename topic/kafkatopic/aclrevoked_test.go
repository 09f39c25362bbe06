package kafkatopic_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a Publish to a topic whose WRITE an ACL change took away
// from the backend's user while it runs fails with an error wrapping
// sarama.ErrTopicAuthorizationFailed that names the topic, without the
// credentials, after one produce request: the producer does not retry an
// authorization failure through its retry budget. Once WRITE is granted
// back, Publish succeeds again, with no restart, and the record reaches
// the subscribers.
func TestAPublishDeniedWriteFailsAtOnceNamingTheTopicAndSucceedsOnceGrantedBack(t *testing.T) {
	k := testbroker.KafkaWithACLs(t)
	o := testOptions[string](k.Cluster, topic.StringCodec{})
	o.Config = k.Config()
	o.Config.Producer.Retry.Max = 10 // a retried refusal would be sent 11 times
	b := newBackend(t, o)
	h := newTopic(t, b, "denied", topic.Options{})
	s := subscribe(t, h, topic.Balanced("g"))
	if err := h.Publish(ctxT(t), "before"); err != nil {
		t.Fatal(err)
	}
	if it := recv(t, s); it.Value != "before" {
		t.Fatalf("received %q, want %q", it.Value, "before")
	}

	var produces atomic.Int64
	to := testbroker.ProducesTo("denied")
	k.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		if to(req) {
			produces.Add(1)
		}
		return nil, nil, false
	})
	k.Deny(t, "denied", sarama.AclOperationWrite)
	err := h.Publish(ctxT(t), "refused")
	if !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		t.Fatalf("Publish denied WRITE = %v, want an error wrapping sarama.ErrTopicAuthorizationFailed", err)
	}
	if text := err.Error(); !strings.Contains(text, `"denied"`) || !strings.Contains(text, "not authorized") || strings.Contains(text, k.Password) {
		t.Fatalf("Publish denied WRITE: %q, want it to name topic \"denied\" and say it is not authorized, without the password", text)
	}
	if n := produces.Load(); n != 1 {
		t.Fatalf("%d produce requests for one denied Publish, want 1", n)
	}

	k.Grant(t, "denied", sarama.AclOperationWrite)
	if err := h.Publish(ctxT(t), "after"); err != nil {
		t.Fatalf("Publish once WRITE is granted back = %v", err)
	}
	if it := recv(t, s); it.Value != "after" {
		t.Fatalf("received %q, want %q", it.Value, "after")
	}
}
