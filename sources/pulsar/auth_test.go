package pulsar_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

const (
	brokerToken = "tok-5d1e-broker-secret"
	wrongToken  = "tok-9c4b-wrong-secret"
)

// tokenEnv starts a broker requiring brokerToken and a client made by
// NewClient that authenticates with token and logs to recs; its timeouts
// are short, so that a refused client gives up within about a second.
func tokenEnv(t *testing.T, token string, recs *records) (*pulsartest.Broker, *bpulsar.Client) {
	t.Helper()
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{AuthToken: brokerToken, Logger: slog.New(recs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c, err := bpulsar.NewClient(pulsar.ClientOptions{URL: b.URL(), Authentication: pulsar.NewAuthenticationToken(token),
		OperationTimeout: time.Second, ConnectionTimeout: time.Second, KeepAliveInterval: time.Second}, slog.New(recs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return b, c
}

// noTokenLogged fails t when a log line shows either token.
func noTokenLogged(t *testing.T, recs *records) {
	t.Helper()
	for _, l := range recs.snapshot() {
		if strings.Contains(l.text, brokerToken) || strings.Contains(l.text, wrongToken) {
			t.Errorf("a log line shows a token: %s", l.text)
		}
	}
}

// With a token the broker refuses, the stage's runs fail within seconds
// with an error wrapping ErrSubscribe that says authentication failed and
// names the broker, never the token, and the stage gives up under its
// Restart policy: the pipeline ends with a *producer.RestartError. No log
// line shows the token.
func TestAWrongTokenFailsTheSourceWithinSecondsNamingTheBrokerNotTheToken(t *testing.T) {
	recs := newRecords()
	b, client := tokenEnv(t, wrongToken, recs)
	src := bpulsar.New(bpulsar.Options{Client: client, Topics: []string{"auth"}, Subscription: "sub"})
	began := time.Now()
	err := runUntilGivenUp(t, "auth", src, 1, slog.New(recs))
	took := time.Since(began)
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	var re *producer.RestartError
	if !errors.As(err, &re) {
		t.Fatalf("Run returned %v, want a *producer.RestartError", err)
	}
	if took > 10*time.Second {
		t.Errorf("the stage gave up after %v, want within 10 s (two runs of a 1 s operation timeout)", took)
	}
	if !errors.Is(re.Last, bpulsar.ErrSubscribe) {
		t.Errorf("last failure %v does not wrap ErrSubscribe", re.Last)
	}
	msg := err.Error()
	if !strings.Contains(strings.ToLower(msg), "authenticat") {
		t.Errorf("error %q does not say authentication failed", msg)
	}
	if !strings.Contains(msg, b.Addr().String()) {
		t.Errorf("error %q does not name the broker %s", msg, b.Addr())
	}
	if strings.Contains(msg, wrongToken) || strings.Contains(msg, brokerToken) {
		t.Errorf("error %q shows a token", msg)
	}
	if b.Stats().AuthenticationFailures == 0 {
		t.Error("the broker refused no connection")
	}
	noTokenLogged(t, recs)
}

// With the token the broker requires, the source subscribes and its
// messages flow, and no log line shows the token.
func TestTheRightTokenLetsMessagesFlow(t *testing.T) {
	recs := newRecords()
	b, client := tokenEnv(t, brokerToken, recs)
	if _, err := b.Publish(context.Background(), "auth-ok", pulsartest.Message{Payload: []byte("m-0")}, pulsartest.Message{Payload: []byte("m-1")}); err != nil {
		t.Fatal(err)
	}
	src := bpulsar.New(bpulsar.Options{Client: client, Topics: []string{"auth-ok"}, Subscription: "sub", Consumer: earliest()})
	got := newReceived()
	_, stop := start(t, pipeline.Options[[]byte, []byte]{
		Name:            "auth-ok",
		Logger:          slog.New(recs),
		ShutdownTimeout: 10 * time.Second,
		Producer:        producer.Options[[]byte]{Source: src, Restart: producer.Restart{MaxRestarts: 1, Window: time.Minute}},
		Processors:      processor.Options[[]byte, []byte]{Handle: recordAll(got)},
	})
	wait.Within(t, waitLimit, "both messages received", func() bool { return got.distinct() >= 2 },
		func() string { return fmt.Sprintf("received %d", got.distinct()) })
	if err := stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if n := b.Stats().AuthenticationFailures; n != 0 {
		t.Errorf("the broker refused %d connections", n)
	}
	noTokenLogged(t, recs)
}

// refusedHandshakeMsg begins the warning pulsar-client-go logs when a
// broker refuses its handshake.
const refusedHandshakeMsg = "Failed to establish connection with broker: "

// With a token the broker refuses, a source that retries for seconds (the
// client refusing at every retry of every lookup) logs the refused
// handshake once, at WARN with the broker's message: the refusals are one
// run of the client's repeated failures.
func TestARefusedHandshakeRetriedForSecondsIsOneWARNLine(t *testing.T) {
	recs := newRecords()
	b, client := tokenEnv(t, wrongToken, recs)
	src := bpulsar.New(bpulsar.Options{Client: client, Topics: []string{"auth-retried"}, Subscription: "sub"})
	err := runUntilGivenUp(t, "auth-retried", src, 2, slog.New(recs))
	var re *producer.RestartError
	if !errors.As(err, &re) {
		t.Fatalf("Run returned %v, want a *producer.RestartError", err)
	}
	if n := b.Stats().AuthenticationFailures; n < 3 {
		t.Fatalf("the broker refused %d connections, want one per run at least (3)", n)
	}
	var warned []string
	for _, l := range recs.snapshot() {
		if l.level == slog.LevelWarn && strings.HasPrefix(l.msg, refusedHandshakeMsg) {
			warned = append(warned, l.text)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "Failed to authenticate") {
		t.Errorf("%d WARN lines of the refused handshake for %d refusals, want 1 with the broker's message:\n%s",
			len(warned), b.Stats().AuthenticationFailures, strings.Join(warned, "\n"))
	}
	noTokenLogged(t, recs)
}
