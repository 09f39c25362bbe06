package pulsar

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
)

// echoingConsumer is a pulsar.Consumer whose acknowledgements fail with a
// broker's refusal quoting the credentials it was given.
type echoingConsumer struct {
	pulsar.Consumer // the methods the source does not call
	refusal         string
}

func (e echoingConsumer) AckID(pulsar.MessageID) error { return errors.New(e.refusal) }

// Guarantee: acknowledgements that fail with a refusal quoting the
// credentials the source's client was made with (the password of its
// service URL, the token of its Authentication) are logged with neither.
func TestFailedAcknowledgementsLogNoCredential(t *testing.T) {
	const password, token = "pw-in-url-4d2c", "t0ken-9f31e"
	o := pulsar.ClientOptions{URL: "pulsar://alice:" + password + "@127.0.0.1:6650",
		Authentication: pulsar.NewAuthenticationToken(token)}
	var logs syncBuffer
	c := &consumer{
		src:  &Source{opts: Options{Client: &Client{secrets: clientSecrets(&o)}}},
		name: "echo",
		c:    echoingConsumer{refusal: "ack refused for token " + token + " and alice:" + password},
		log:  slog.New(slog.NewTextHandler(&logs, nil)),
		acks: newAckQueue(),
	}
	if n := c.send([]ackOp{{m: heldMessage{}}}); n != 1 {
		t.Fatalf("send handed %d acks to the client, want 1", n)
	}
	line := logs.b.String()
	if !strings.Contains(line, "pulsar acknowledgements failed") || !strings.Contains(line, "ack refused") {
		t.Fatalf("the failed acknowledgement was not logged with its refusal:\n%s", line)
	}
	for _, secret := range []string{password, token} {
		if strings.Contains(line, secret) {
			t.Errorf("the line shows a credential: %s", line)
		}
	}
}
