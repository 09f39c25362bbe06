package kafkatopology

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/redact/redacttest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: the options and a backend made with SASL credentials print
// none of them, with any fmt verb (%s and %d included: they would reach
// the sarama configuration), encoded as JSON or logged; they say the
// credentials were left out.
func TestOptionsAndBackendPrintNoCredentials(t *testing.T) {
	const user, password = "alice", "pw-51c2d7-secret"
	c := testbroker.Kafka(t, kfake.EnableSASL(), kfake.Superuser(sarama.SASLTypePlaintext, user, password))
	cfg := testbroker.SaramaConfig()
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	cfg.Net.SASL.User, cfg.Net.SASL.Password = user, password
	o := Options[topologytest.Msg]{
		Brokers: c.ListenAddrs(), Config: cfg, Codec: topic.JSONCodec[topologytest.Msg]{},
		AdminTimeout: 30 * time.Second, Logger: slog.New(slog.DiscardHandler),
	}
	redacttest.NoSecret(t, "the options", o, password)
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "the backend", b.Close) })
	redacttest.NoSecret(t, "the backend", b, password)
	for what, v := range map[string]any{"options": o, "backend": b} {
		if s := fmt.Sprintf("%s", v); !strings.Contains(s, "credentials:redacted") {
			t.Errorf("the %s print as %s, want credentials:redacted", what, s)
		}
	}
}

// echoing is the text of a cluster's refusal that quotes the client's SASL
// credentials back.
func echoing(user, password string) string {
	return "refused for " + user + " with password " + password
}

// Guarantee: a cluster whose refusals quote the client's SASL credentials
// (a failed login, a refused topic creation, a refused description of
// topic configurations) shows them in no error New or Declare returns and
// no line the backend logs; the errors still wrap ErrConnect or ErrAdmin.
func TestRefusalsEchoingCredentialsShowNone(t *testing.T) {
	const user, password = "alice-7d1e", "pw-3b9a60-secret"
	c := testbroker.Kafka(t, kfake.EnableSASL(), kfake.Superuser(sarama.SASLTypePlaintext, user, password))
	var logs logtest.Lines
	o := Options[topologytest.Msg]{
		Brokers: c.ListenAddrs(), Config: testbroker.SaramaConfig(), Codec: topic.JSONCodec[topologytest.Msg]{},
		AdminTimeout: 30 * time.Second, RevokeTimeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	o.Config.Net.SASL.Enable = true
	o.Config.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	o.Config.Net.SASL.User, o.Config.Net.SASL.Password = user, password
	check := func(what, s string) {
		t.Helper()
		for _, secret := range []string{user, password} {
			if strings.Contains(s, secret) {
				t.Errorf("%s shows a credential: %s", what, s)
			}
		}
	}

	// A failed login.
	c.ControlKey(kmsg.SASLAuthenticate.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		resp := kreq.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := echoing(user, password)
		resp.ErrorMessage = &msg
		return resp, nil, true
	})
	_, err := New(o)
	if !errors.Is(err, ErrConnect) {
		t.Fatalf("New with its login refused = %v, want an error wrapping ErrConnect", err)
	}
	check("New's error", err.Error())

	// A refused topic creation, and refused descriptions of the
	// configurations of the topics that exist.
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "the backend", b.Close) })
	c.ControlKey(kmsg.CreateTopics.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.CreateTopicsRequest)
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode = rt.Topic, kerr.TopicAuthorizationFailed.Code
			msg := echoing(user, password)
			st.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	top, err := topology.New("refused").Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Declare(t.Context(), top); !errors.Is(err, ErrAdmin) {
		t.Fatalf("Declare with its topic creation refused = %v, want an error wrapping ErrAdmin", err)
	} else {
		check("Declare's error", err.Error())
	}
	for _, name := range []string{"kept", "kept-dlq"} {
		if err := c.CreateTopic(name, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	msg := echoing(user, password)
	testbroker.RefuseDescribeConfigsSaying(c, &msg)
	top, err = topology.New("kept").DLQ().Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Declare(t.Context(), top); err != nil {
		t.Fatalf("Declare where topic configurations cannot be described: %v", err)
	}
	if len(testbroker.LinesWith(strings.Join(logs.All(), ""), msgUnchecked)) == 0 {
		t.Fatalf("no WARN %q: the check of the log would prove nothing; logged:\n%s", msgUnchecked, strings.Join(logs.All(), ""))
	}
	for _, l := range logs.All() {
		check("a log line", l)
	}
}
