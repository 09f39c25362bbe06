package pulsartopic_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/redact/redacttest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// syncBuffer is a bytes.Buffer safe for the client's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const (
	password = "pAssw0rd-in-URL"
	token    = "t0ken-SECRET-value"
)

// Guarantee: neither a token nor a password in the service URL appears in
// any error or log line (debug included), whether the broker cannot be
// reached or works.
func TestSecretsNeverInErrorsOrLogs(t *testing.T) {
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	check := func(what, s string) {
		t.Helper()
		for _, secret := range []string{password, token} {
			if strings.Contains(s, secret) {
				t.Fatalf("%s shows a secret: %s", what, s)
			}
		}
	}

	// A broker that never answers: the declaration fails.
	addr := testnet.SilentListener(t)
	o := pulsartopic.Options[int]{
		ServiceURL: "pulsar://user:" + password + "@" + addr,
		Codec:      topic.IntCodec{}, Logger: logger,
		ClientOptions: pulsar.ClientOptions{
			Authentication:    pulsar.NewAuthenticationToken(token),
			OperationTimeout:  time.Second,
			KeepAliveInterval: time.Second,
		},
	}
	be, err := pulsartopic.New(o)
	if err != nil {
		t.Fatal(err)
	}
	check("backend", be.String())
	_, err = topic.NewTopic[int]("orders", topic.Options{}, be)
	if err == nil {
		t.Fatal("declaration against a silent broker succeeded")
	}
	check("declaration error", err.Error())
	if err := be.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// A working broker, with the same credentials.
	b := testbroker.Pulsar(t)
	o.ServiceURL = strings.Replace(b.URL(), "pulsar://", "pulsar://user:"+password+"@", 1)
	o.ClientOptions.OperationTimeout = 5 * time.Second
	o.SendTimeout = -1
	be = newBackend(t, o)
	h, err := topic.NewTopic[int]("orders", topic.Options{}, be)
	if err != nil {
		t.Fatalf("declaration: %v", err)
	}
	sub, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Publish(ctxT(t), 7); err != nil {
		t.Fatal(err)
	}
	if it, err := sub.Receive(ctxT(t)); err != nil || it.Value != 7 {
		t.Fatalf("Receive = %+v, %v", it, err)
	}
	sub.Close()
	h.Close()
	if err := h.Publish(ctxT(t), 8); err != nil {
		check("publish error", err.Error())
	}
	if logs.String() == "" {
		t.Fatal("nothing was logged: the check would prove nothing")
	}
	check("logs", logs.String())
}

// Guarantee: a backend made with a password in its service URL and a
// token prints neither, with any fmt verb (%#v and %d included), encoded
// as JSON or logged; it names its broker with the user information
// redacted.
func TestBackendPrintsNoSecret(t *testing.T) {
	o := testOptions(testbroker.Pulsar(t), topic.IntCodec{})
	o.ServiceURL = strings.Replace(o.ServiceURL, "pulsar://", "pulsar://user:"+password+"@", 1)
	o.ClientOptions.Authentication = pulsar.NewAuthenticationToken(token)
	be := newBackend(t, o)
	redacttest.NoSecret(t, "the backend", be, password, token)
	if s := fmt.Sprintf("%#v", be); !strings.Contains(s, "pulsar://user:xxxxx@") {
		t.Fatalf("%%#v of the backend = %s, want its broker's URL, redacted", s)
	}
}

// Guarantee: a broker that refuses a subscribe with a message quoting the
// token and the password the client was created with (as a misconfigured
// authorization plugin may) shows neither in the subscribe's error; the
// error keeps the refusal and the topic.
func TestBrokerRefusalEchoingCredentialsShowsNone(t *testing.T) {
	b := testbroker.Pulsar(t)
	o := testOptions(b, topic.IntCodec{})
	o.ServiceURL = strings.Replace(o.ServiceURL, "pulsar://", "pulsar://user:"+password+"@", 1)
	o.ClientOptions.Authentication = pulsar.NewAuthenticationToken(token)
	be := newBackend(t, o)
	h, err := topic.NewTopic[int]("echoes", topic.Options{}, be)
	if err != nil {
		t.Fatalf("declaration: %v", err)
	}
	defer h.Close()
	b.RefuseSubscribe("echoes", "g", &pulsartest.ServerError{Code: pulsartest.AuthorizationError,
		Message: "token " + token + " of user:" + password + " may not subscribe"})
	_, err = h.Subscribe(ctxT(t), topic.Balanced("g"), topic.SubscriberOptions{})
	var perr *pulsartopic.Error
	if !errors.As(err, &perr) {
		t.Fatalf("Subscribe = %v, want a *pulsartopic.Error", err)
	}
	if !strings.Contains(err.Error(), "may not subscribe") || !strings.Contains(err.Error(), "echoes") {
		t.Errorf("Subscribe = %v, want the broker's refusal and the topic", err)
	}
	redacttest.NoSecret(t, "the subscribe's error", err, password, token)
}

// Guarantee: an *Error's message holds neither the user information of a
// URL its cause quotes nor a line break, whatever cause it wraps.
func TestErrorMessageShowsNoURLUserInformation(t *testing.T) {
	err := &pulsartopic.Error{Op: "publish to", Topic: "persistent://public/default/t",
		Err: errors.New("dial pulsar://alice:s3cret@broker:6650 refused\nretrying")}
	if s := err.Error(); strings.Contains(s, "s3cret") || strings.ContainsAny(s, "\r\n") {
		t.Fatalf("Error() = %q, want no password and no line break", s)
	}
}
