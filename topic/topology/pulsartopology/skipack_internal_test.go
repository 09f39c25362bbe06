package pulsartopology

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
)

// refusingConsumer is a consumer whose acknowledgements fail, as
// pulsar-client-go's do once the consumer is closed.
type refusingConsumer struct {
	pulsar.Consumer
}

func (refusingConsumer) AckID(pulsar.MessageID) error { return errors.New("consumer closed") }

// skippedMessage is a message a reader skips: one for another group.
type skippedMessage struct {
	pulsar.Message
}

func (skippedMessage) Topic() string { return "persistent://public/default/orders" }

func (skippedMessage) ID() pulsar.MessageID { return pulsar.EarliestMessageID() }

func (skippedMessage) Properties() map[string]string { return map[string]string{PropGroup: "billing"} }

func (skippedMessage) Payload() []byte { return []byte(`"v"`) }

func (skippedMessage) Key() string { return "" }

// Guarantee: a skipped message whose acknowledgement fails (the broker
// delivers it again) is logged once with the topic and the message id,
// so that an operator can tell which message keeps coming back.
func TestAFailedAcknowledgementOfASkippedMessageNamesIt(t *testing.T) {
	var logs bytes.Buffer
	b := &Backend[string]{log: slog.New(slog.NewTextHandler(&logs, nil))}
	b.opts.Codec = topic.JSONCodec[string]{}
	r := &reader[string]{b: b, cons: refusingConsumer{}, group: "shipping"}
	r.take(pulsar.ConsumerMessage{Message: skippedMessage{}}, nil, 0)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("logged %d lines, want one:\n%s", len(lines), logs.String())
	}
	for _, want := range []string{"level=WARN", "acknowledging a skipped message failed", `topic=persistent://public/default/orders`,
		"message_id=" + pulsar.EarliestMessageID().String(), `error="consumer closed"`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the line %q lacks %q", lines[0], want)
		}
	}
}

// echoingConsumer is a consumer whose acknowledgements fail with a
// broker's refusal quoting the credentials it was given.
type echoingConsumer struct {
	pulsar.Consumer
	refusal string
}

func (e echoingConsumer) AckID(pulsar.MessageID) error { return errors.New(e.refusal) }

// Guarantee: a failed acknowledgement of a skipped message whose refusal
// quotes the credentials the backend's client was made with (the password
// of its service URL, the token of its Authentication) is logged with
// neither, as Settle's error shows neither.
func TestAFailedAcknowledgementOfASkippedMessageLogsNoCredential(t *testing.T) {
	const password, token = "pw-in-url-61be", "t0ken-c2a97"
	client, err := spulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://alice:" + password + "@127.0.0.1:6650",
		Authentication: pulsar.NewAuthenticationToken(token)}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var logs bytes.Buffer
	b := &Backend[string]{client: client, log: slog.New(slog.NewTextHandler(&logs, nil))}
	b.opts.Codec = topic.JSONCodec[string]{}
	r := &reader[string]{b: b, cons: echoingConsumer{refusal: "ack refused for token " + token + " and alice:" + password}, group: "shipping"}
	r.take(pulsar.ConsumerMessage{Message: skippedMessage{}}, nil, 0)
	line := logs.String()
	if !strings.Contains(line, "acknowledging a skipped message failed") || !strings.Contains(line, "ack refused") {
		t.Fatalf("the failed acknowledgement was not logged with its refusal:\n%s", line)
	}
	for _, secret := range []string{password, token} {
		if strings.Contains(line, secret) {
			t.Errorf("the line shows a credential: %s", line)
		}
	}
}
