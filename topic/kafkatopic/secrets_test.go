package kafkatopic_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/redact/redacttest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

const (
	saslUser     = "alice"
	saslPassword = "pw-9f3c1e-right"
	wrongPass    = "pw-77ab02-wrong"
)

func saslOptions(c *kfake.Cluster, pass string, logs *logBuffer) kafkatopic.Options[string] {
	o := testOptions[string](c, topic.StringCodec{})
	o.Config.Net.SASL.Enable = true
	o.Config.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	o.Config.Net.SASL.User = saslUser
	o.Config.Net.SASL.Password = pass
	o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return o
}

// Credentials never appear in errors, log lines, or the options however
// they are printed; SASL from the sarama config is used as given.
func TestSecretsNeverPrintedOrLogged(t *testing.T) {
	c := testbroker.Kafka(t, kfake.EnableSASL(), kfake.Superuser(sarama.SASLTypePlaintext, saslUser, saslPassword))
	var logs logBuffer

	// A wrong password: New fails, and says nothing of the password.
	bad := saslOptions(c, wrongPass, &logs)
	_, err := kafkatopic.New(bad)
	if err == nil {
		t.Fatal("New with a wrong password succeeded")
	}
	if strings.Contains(err.Error(), wrongPass) {
		t.Fatalf("error shows the password: %v", err)
	}
	// The options, printed every way and logged as JSON.
	var printed []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		printed = append(printed, fmt.Sprintf(verb, bad))
	}
	j, err := json.Marshal(bad)
	if err != nil {
		t.Fatal(err)
	}
	printed = append(printed, string(j))
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("options", "opts", bad)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("options", "opts", bad)
	for _, p := range printed {
		if strings.Contains(p, wrongPass) {
			t.Fatalf("printed options show the password: %s", p)
		}
	}
	if !strings.Contains(printed[0], "credentials:redacted") {
		t.Fatalf("printed options %s do not say the credentials were left out", printed[0])
	}

	// The right password: the backend works through SASL.
	b := newBackend(t, saslOptions(c, saslPassword, &logs))
	h := newTopic(t, b, "secure", topic.Options{Mode: topic.Mixed})
	g := subscribe(t, h, topic.Balanced("g"))
	bc := subscribe(t, h, topic.Broadcast())
	if err := h.Publish(ctxT(t), "hello"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*topic.Subscription[string]{g, bc} {
		if it := recv(t, s); it.Value != "hello" {
			t.Fatalf("received %+v", it)
		}
	}
	// Nothing logged along the way shows a password.
	for _, secret := range []string{saslPassword, wrongPass} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("logs show a password: %s", logs.String())
		}
	}
}

// A balanced Subscribe that Kafka refuses for lack of permission on the
// consumer group fails at once with Kafka's refusal, not after
// AdminTimeout with a deadline error that hides it.
func TestSubscribeDeniedOnTheGroupFailsAtOnce(t *testing.T) {
	var acls []kfake.ACL
	for _, r := range []kmsg.ACLResourceType{kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeCluster} {
		name := "*"
		if r == kmsg.ACLResourceTypeCluster {
			name = "kafka-cluster"
		}
		acls = append(acls, kfake.ACL{Resource: r, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral,
			Operation: kmsg.ACLOperationAll, Allow: true})
	}
	// alice may do anything with topics and the cluster, nothing with
	// consumer groups.
	c := testbroker.Kafka(t, kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(sarama.SASLTypePlaintext, "admin", "admin-pw"),
		kfake.User(sarama.SASLTypePlaintext, saslUser, saslPassword, acls...))
	var logs logBuffer
	o := saslOptions(c, saslPassword, &logs)
	const adminTimeout = 2 * time.Minute
	o.AdminTimeout = adminTimeout
	be := newBackend(t, o)
	h, err := topic.NewBroker[string]().CreateTopic("jobs", topic.Options{}, be)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
	took := time.Since(start)
	if !errors.Is(err, kafkatopic.ErrAdmin) || !errors.Is(err, sarama.ErrGroupAuthorizationFailed) {
		t.Fatalf("Subscribe = %v, want ErrAdmin wrapping sarama.ErrGroupAuthorizationFailed", err)
	}
	if took >= adminTimeout/2 {
		t.Fatalf("Subscribe took %v to fail; a refusal must not wait out the AdminTimeout (%v)", took, adminTimeout)
	}
	// A topic alone needs no group: publishing works.
	if err := h.Publish(ctxT(t), "x"); err != nil {
		t.Fatalf("Publish with topic permissions: %v", err)
	}
}

// Guarantee: a backend made with SASL credentials prints none of them,
// with any fmt verb (%#v, %s and %d included: they would reach the sarama
// configuration the backend holds), encoded as JSON or logged.
func TestBackendPrintsNoCredentials(t *testing.T) {
	c := testbroker.Kafka(t, kfake.EnableSASL(), kfake.Superuser(sarama.SASLTypePlaintext, saslUser, saslPassword))
	var logs logBuffer
	b := newBackend(t, saslOptions(c, saslPassword, &logs))
	redacttest.NoSecret(t, "the backend", b, saslPassword)
	if s := fmt.Sprintf("%#v", b); !strings.Contains(s, "credentials:redacted") {
		t.Fatalf("%%#v of the backend = %s, want its options, credentials redacted", s)
	}
}

// Guarantee: the error of a New whose credentials a broker refuses by
// closing the connection names the broker and ends with its cause, with
// no empty part after it, and claims no wait it did not make.
func TestConnectErrorEndsWithTheBrokersCause(t *testing.T) {
	c := testbroker.Kafka(t, kfake.EnableSASL(), kfake.Superuser(sarama.SASLTypePlaintext, saslUser, saslPassword))
	var logs logBuffer
	_, err := kafkatopic.New(saslOptions(c, wrongPass, &logs))
	if !errors.Is(err, kafkatopic.ErrConnect) {
		t.Fatalf("New = %v, want ErrConnect", err)
	}
	// kfake closes the connection: the cause is EOF (or a reset).
	msg := err.Error()
	if broker := fmt.Sprintf("%q: ", c.ListenAddrs()[0]); !strings.Contains(msg, broker) || strings.HasSuffix(msg, ": ") {
		t.Fatalf("New = %q, want the broker %s followed by its cause, last", msg, broker)
	}
	// The broker closed the connection at once: the error does not say
	// that New waited for it.
	if strings.Contains(msg, "within") {
		t.Fatalf("New = %q, want no claim of a wait for a broker that failed at once", msg)
	}
}
