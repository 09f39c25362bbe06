package pulsartopology_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// tokenBackend starts a broker requiring testbroker.PulsarToken and a
// backend on it that authenticates with tok, logs to lines and gives each
// operation 2 s (its client's lookups 1 s).
func tokenBackend(t *testing.T, tok string, lines *logtest.Lines) (*pulsartest.Broker, *pulsartopology.Backend[int]) {
	t.Helper()
	b := testbroker.PulsarWithToken(t)
	o := options[int](b, topic.IntCodec{})
	o.Logger = slog.New(slog.NewTextHandler(lines, nil))
	o.OperationTimeout = 2 * time.Second
	o.ClientOptions = testbroker.TokenClientOptions(tok)
	return b, newBackend(t, o)
}

// Guarantee: Declare with a token the broker refuses fails within its
// operation timeout with an error wrapping ErrDeclare and ErrConnect that
// says authentication failed and names the broker; neither that error nor
// any log line shows a token.
func TestDeclareWithAWrongTokenFailsSayingAuthenticationFailedNotTheToken(t *testing.T) {
	var lines logtest.Lines
	b, be := tokenBackend(t, testbroker.WrongPulsarToken, &lines)
	start := time.Now()
	_, err := be.Declare(ctxT(t), build(t, topology.New("orders").DLQ()))
	testbroker.RefusedToken(t, "Declare", err, pulsartopology.ErrConnect, time.Since(start), 5*time.Second, b, lines.All())
	if !errors.Is(err, pulsartopology.ErrDeclare) {
		t.Errorf("Declare = %v, want an error wrapping ErrDeclare", err)
	}
}

// Guarantee: with the token the broker requires, Declare makes the
// topology's topics and a reader of its group subscribes, and no log line
// shows the token.
func TestDeclareWithTheRightTokenWorks(t *testing.T) {
	var lines logtest.Lines
	b, be := tokenBackend(t, testbroker.PulsarToken, &lines)
	declared(t, be, build(t, topology.New("orders").DLQ()))
	testbroker.AcceptedToken(t, b, lines.All())
}
