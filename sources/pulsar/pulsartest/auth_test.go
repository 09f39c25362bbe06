package pulsartest

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/boulevard-go/boulevard/internal/logtest"
)

const testToken = "tok-3f9a1c-right"

// connectWith sends a CONNECT carrying method and data (none when empty).
func (r *rawConn) connectWith(method, data string) {
	r.t.Helper()
	r.send(cmdConnect, func(o []byte) []byte {
		o = appendStringField(o, 1, "raw-test")
		if data != "" {
			o = appendStringField(o, 3, data)
		}
		o = appendVarintField(o, 4, 20)
		if method != "" {
			o = appendStringField(o, 5, method)
		}
		return o
	}, nil)
}

// With AuthToken set, a CONNECT carrying the token is answered CONNECTED;
// one without it (no credentials, a wrong token, the token under another
// method) is answered as Pulsar answers a failed authentication, an ERROR
// with request id -1 and code AuthenticationError, and the connection is
// then closed. The token shows in no log line.
func TestAuthTokenAdmitsOnlyAConnectCarryingIt(t *testing.T) {
	var lines logtest.Lines
	b := startBrokerWith(t, Options{AuthToken: testToken,
		Logger: slog.New(slog.NewTextHandler(&lines, &slog.HandlerOptions{Level: slog.LevelDebug}))})

	ok := dialRaw(t, b)
	ok.connectWith("token", testToken)
	ok.expect(cmdConnected)
	ok.send(cmdPing, nil, nil)
	ok.expect(cmdPong)

	refused := []struct{ name, method, data string }{
		{"no credentials", "", ""},
		{"wrong token", "token", "tok-wrong-77e2"},
		{"token under another method", "basic", testToken},
		{"token without a method", "", testToken},
	}
	for _, c := range refused {
		r := dialRaw(t, b)
		r.connectWith(c.method, c.data)
		f, _ := r.expect(cmdError)
		if f.u[1] != math.MaxUint64 || ServerErrorCode(f.u[2]) != AuthenticationError || f.str(3) != "Failed to authenticate" {
			t.Errorf("%s: ERROR request %d, code %d, %q; want request -1, code %d, \"Failed to authenticate\"",
				c.name, f.u[1], f.u[2], f.str(3), AuthenticationError)
		}
		_ = r.nc.SetReadDeadline(time.Now().Add(rawReadWait))
		if _, err := r.nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("%s: connection not closed after the ERROR: read returned %v", c.name, err)
		}
	}
	if st := b.Stats(); st.AuthenticationFailures != int64(len(refused)) {
		t.Errorf("AuthenticationFailures = %d, want %d", st.AuthenticationFailures, len(refused))
	}
	if n := lines.Count("authentication failed"); n != len(refused) {
		t.Errorf("%d lines say authentication failed, want %d: %q", n, len(refused), lines.All())
	}
	for _, l := range lines.All() {
		if strings.Contains(l, testToken) || strings.Contains(l, "tok-wrong") {
			t.Errorf("a log line shows a token: %s", l)
		}
	}
}

// authClient returns a pulsar-client-go client on b authenticating with
// token (none when empty), closed at the end of the test.
func authClient(t *testing.T, b *Broker, token string) pulsar.Client {
	t.Helper()
	o := pulsar.ClientOptions{URL: b.URL(), OperationTimeout: time.Second, ConnectionTimeout: time.Second,
		KeepAliveInterval: time.Second, Logger: plog.DefaultNopLogger()}
	if token != "" {
		o.Authentication = pulsar.NewAuthenticationToken(token)
	}
	c, err := pulsar.NewClient(o)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// pulsar-client-go with the broker's token produces and consumes; with a
// wrong token, or none, its calls fail within its operation timeout, every
// connection it opens refused.
func TestAuthTokenPulsarClientWorksOnlyWithTheToken(t *testing.T) {
	b := startBrokerWith(t, Options{AuthToken: testToken})
	ctx := ctxT(t)
	topic := uniqueTopic(t)

	c := authClient(t, b, testToken)
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatalf("Subscribe with the token: %v", err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatalf("CreateProducer with the token: %v", err)
	}
	defer p.Close()
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("m")}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if m := receive(t, ctx, cons); string(m.Payload()) != "m" {
		t.Fatalf("received %q", m.Payload())
	}
	if st := b.Stats(); st.AuthenticationFailures != 0 {
		t.Fatalf("AuthenticationFailures = %d with the right token", st.AuthenticationFailures)
	}

	for _, token := range []string{"tok-wrong-77e2", ""} {
		before := b.Stats().AuthenticationFailures
		began := time.Now()
		_, err := authClient(t, b, token).CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err == nil {
			t.Fatalf("CreateProducer with token %q succeeded", token)
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Errorf("CreateProducer with token %q failed after %v, want within 5 s", token, d)
		}
		if after := b.Stats().AuthenticationFailures; after == before {
			t.Errorf("token %q: no connection refused (CreateProducer: %v)", token, err)
		}
		t.Logf("token %q: %v", token, err)
	}
}
