package testbroker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/redact/redacttest"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// PulsarToken is the token PulsarWithToken's broker requires;
// WrongPulsarToken is one it refuses.
const (
	PulsarToken      = "tok-3a7f-broker-secret"
	WrongPulsarToken = "tok-e21c-wrong-secret"
)

// PulsarWithToken starts a pulsartest broker that requires PulsarToken,
// logging to PulsarLogger, closed at t's cleanup.
func PulsarWithToken(t testing.TB) *pulsartest.Broker {
	t.Helper()
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{AuthToken: PulsarToken, Logger: PulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TokenClientOptions are the options of a backend's client that
// authenticates with tok and gives up on a broker within about a second:
// each lookup retries for 1 s, each connection waits 1 s.
func TokenClientOptions(tok string) pulsar.ClientOptions {
	return pulsar.ClientOptions{Authentication: pulsar.NewAuthenticationToken(tok),
		OperationTimeout: time.Second, ConnectionTimeout: time.Second}
}

// RefusedToken fails t unless err, what the call named what returned
// after took when it authenticated with WrongPulsarToken to b, wraps
// sentinel, came within bound, says authentication failed and names b's
// address as a broker, and b refused a connection; and when err or one of
// lines shows a token.
func RefusedToken(t testing.TB, what string, err, sentinel error, took, bound time.Duration, b *pulsartest.Broker, lines []string) {
	t.Helper()
	t.Logf("%s after %v: %v", what, took.Round(time.Millisecond), err)
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s = %v, want an error wrapping %v", what, err, sentinel)
	}
	if took > bound {
		t.Errorf("%s took %v, want at most %v", what, took, bound)
	}
	msg := err.Error()
	if !strings.Contains(strings.ToLower(msg), "authenticat") {
		t.Errorf("%s = %v, want it to say authentication failed", what, err)
	}
	if !strings.Contains(msg, "broker pulsar://"+b.Addr().String()) {
		t.Errorf("%s = %v, want it to name the broker %s", what, err, b.Addr())
	}
	if b.Stats().AuthenticationFailures == 0 {
		t.Error("the broker refused no connection")
	}
	redacttest.NoSecret(t, what+"'s error", err, WrongPulsarToken, PulsarToken)
	for _, l := range lines {
		redacttest.NoSecret(t, "a log line", l, WrongPulsarToken, PulsarToken)
	}
}

// AcceptedToken fails t when b refused a connection or one of lines shows
// PulsarToken.
func AcceptedToken(t testing.TB, b *pulsartest.Broker, lines []string) {
	t.Helper()
	if n := b.Stats().AuthenticationFailures; n != 0 {
		t.Errorf("the broker refused %d connections", n)
	}
	for _, l := range lines {
		redacttest.NoSecret(t, "a log line", l, PulsarToken)
	}
}
