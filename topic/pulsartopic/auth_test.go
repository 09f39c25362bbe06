package pulsartopic_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// tokenBackend starts a broker requiring testbroker.PulsarToken and a
// backend on it that authenticates with tok, logs to lines and gives a
// declaration 2 s (its client's lookups 1 s).
func tokenBackend(t *testing.T, tok string, lines *logtest.Lines) (*pulsartest.Broker, *pulsartopic.Backend[int]) {
	t.Helper()
	b := testbroker.PulsarWithToken(t)
	o := testOptions[int](b, topic.IntCodec{})
	o.Logger = slog.New(slog.NewTextHandler(lines, nil))
	o.AdminTimeout = 2 * time.Second
	o.ClientOptions = testbroker.TokenClientOptions(tok)
	return b, newBackend(t, o)
}

// Guarantee: a declaration with a token the broker refuses fails within
// its admin timeout with an *Error wrapping ErrConnect that says
// authentication failed and names the broker; neither that error nor any
// log line shows a token.
func TestADeclarationWithAWrongTokenFailsSayingAuthenticationFailedNotTheToken(t *testing.T) {
	var lines logtest.Lines
	b, be := tokenBackend(t, testbroker.WrongPulsarToken, &lines)
	start := time.Now()
	_, err := topic.NewTopic[int]("orders", topic.Options{}, be)
	testbroker.RefusedToken(t, "NewTopic", err, pulsartopic.ErrConnect, time.Since(start), 5*time.Second, b, lines.All())
	var perr *pulsartopic.Error
	if !errors.As(err, &perr) {
		t.Errorf("NewTopic = %v, want a *pulsartopic.Error", err)
	}
}

// Guarantee: with the token the broker requires, a topic is declared and
// published to, and no log line shows the token.
func TestADeclarationWithTheRightTokenWorks(t *testing.T) {
	var lines logtest.Lines
	b, be := tokenBackend(t, testbroker.PulsarToken, &lines)
	h, err := topic.NewTopic[int]("orders", topic.Options{}, be)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Publish(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	if n := len(b.Messages(be.TopicName("orders"))); n != 1 {
		t.Fatalf("%d messages stored, want 1", n)
	}
	testbroker.AcceptedToken(t, b, lines.All())
}
