package pulsartopology_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/redact/redacttest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// Guarantee: neither a password in the service URL nor a token shows when
// the options or the backend are printed with any fmt verb, logged by a
// text or JSON handler, or encoded as JSON; what they show names the
// broker with its user information redacted.
func TestOptionsAndBackendNeverPrintCredentials(t *testing.T) {
	const password, token = "pAssw0rd-in-URL-5e", "t0ken-SECRET-7a"
	checkOptionsAndBackend(t, "pulsar://user:"+password+"@"+testnet.SilentListener(t), password, token, "pulsar://user:xxxxx@")
}

// Guarantee: a password written in the service URL without
// percent-encoding (a "/", "?", "#" or space in it, where the URL cannot
// tell where its user information ends) does not show either, whether New
// makes the backend or refuses the URL.
func TestOptionsAndBackendNeverPrintAPasswordThatDoesNotParse(t *testing.T) {
	const tail = "pAss-4c2d"
	for _, pw := range []string{"p/" + tail, "p?" + tail, "p#" + tail, "p " + tail} {
		checkOptionsAndBackend(t, "pulsar://user:"+pw+"@"+testnet.SilentListener(t), tail, "t0ken-SECRET-7a", "pulsar://xxxxx@")
	}
}

// checkOptionsAndBackend prints options with serviceURL and a token, and
// the backend New makes of them (or New's error), every way, and fails
// when secret or token shows or the options do not name the broker as
// want….
func checkOptionsAndBackend(t *testing.T, serviceURL, secret, token, want string) {
	t.Helper()
	o := pulsartopology.Options[int]{
		ServiceURL: serviceURL,
		Codec:      topic.IntCodec{},
		ClientOptions: pulsar.ClientOptions{
			Authentication: pulsar.NewAuthenticationToken(token),
		},
		Logger: slog.New(slog.DiscardHandler),
	}
	var printed []string
	values := []any{o, &o}
	be, err := pulsartopology.New(o) // connects lazily: nothing is sent
	if err != nil {
		printed = append(printed, err.Error())
	} else {
		defer func() {
			if err := be.Close(context.Background()); err != nil {
				t.Error(err)
			}
		}()
		values = append(values, be)
	}
	for _, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			printed = append(printed, fmt.Sprintf(verb, v))
		}
		if j, err := json.Marshal(v); err == nil {
			printed = append(printed, string(j))
		}
	}
	var lines logtest.Lines
	var args []any
	for i, v := range values {
		args = append(args, fmt.Sprint("value", i), v)
	}
	slog.New(slog.NewTextHandler(&lines, nil)).Info("made", args...)
	slog.New(slog.NewJSONHandler(&lines, nil)).Info("made", args...)
	printed = append(printed, lines.All()...)
	for _, p := range printed {
		for _, s := range []string{secret, token} {
			if strings.Contains(p, s) {
				t.Fatalf("%s: a credential shows: %s", serviceURL, p)
			}
		}
	}
	if !strings.Contains(fmt.Sprint(o), want) {
		t.Fatalf("options print %v; want them to name the broker as %s…", o, want)
	}
	if be != nil && !strings.Contains(fmt.Sprint(be), want) {
		t.Fatalf("the backend prints %v; want it to name the broker as %s…", be, want)
	}
}

// Guarantee: Declare against a broker address where nothing listens fails
// by the client's operation timeout, and sooner by its context's deadline, with
// an error wrapping ErrDeclare, ErrConnect and context.DeadlineExceeded that
// names the broker's address and the refusal; a WARN line names them too;
// neither the user information of the service URL nor the token shows in
// the errors or the log.
func TestDeclareWhereNothingListensFailsByItsBoundsWarningOfTheRefusal(t *testing.T) {
	const password, token = "pAssw0rd-in-URL-5e", "t0ken-SECRET-7a"
	var lines logtest.Lines
	addr := testnet.ClosedPort(t)
	o := pulsartopology.Options[int]{ServiceURL: "pulsar://user:" + password + "@" + addr, Codec: topic.IntCodec{},
		Logger: slog.New(slog.NewTextHandler(&lines, nil)), OperationTimeout: 2 * time.Second}
	o.ClientOptions.Authentication = pulsar.NewAuthenticationToken(token)
	be := newBackend(t, o)
	for _, tc := range []struct {
		name  string
		bound time.Duration
	}{{"the client's operation timeout", time.Minute}, {"the context's deadline", 200 * time.Millisecond}} {
		ctx, cancel := context.WithTimeout(context.Background(), tc.bound)
		start := time.Now()
		_, err := be.Declare(ctx, build(t, topology.New("orders").DLQ()))
		cancel()
		if !errors.Is(err, pulsartopology.ErrDeclare) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, pulsartopology.ErrConnect) {
			t.Fatalf("Declare bounded by %s = %v, want an error wrapping ErrDeclare, ErrConnect and context.DeadlineExceeded", tc.name, err)
		}
		for _, want := range []string{"broker pulsar://" + addr, "connection refused"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Declare bounded by %s = %v, want it to name %q", tc.name, err, want)
			}
		}
		redacttest.NoSecret(t, "the declaration's error", err, "user")
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("Declare bounded by %s took %v", tc.name, d)
		}
		redacttest.NoSecret(t, "the declaration's error", err, password, token)
	}
	if lines.Count("level=WARN", addr, "connection refused") == 0 {
		t.Errorf("no WARN line names %s and the refusal:\n%s", addr, strings.Join(lines.All(), ""))
	}
	for _, l := range lines.All() {
		redacttest.NoSecret(t, "a log line", l, password, token)
	}
}

// Guarantee: a broker that refuses a subscription with a message quoting
// the token and the password the client was created with shows neither in
// the declaration's error; the error keeps the refusal and wraps
// ErrDeclare.
func TestBrokerRefusalEchoingCredentialsShowsNone(t *testing.T) {
	const password, token = "pAssw0rd-in-URL-5e", "t0ken-SECRET-7a"
	b := testbroker.Pulsar(t)
	o := options(b, topic.IntCodec{})
	o.ServiceURL = strings.Replace(o.ServiceURL, "pulsar://", "pulsar://user:"+password+"@", 1)
	o.ClientOptions.Authentication = pulsar.NewAuthenticationToken(token)
	be := newBackend(t, o)
	b.RefuseSubscribe(be.TopicName("echoes-dlq"), pulsartopology.DeadSubscription, &pulsartest.ServerError{
		Code: pulsartest.AuthorizationError, Message: "token " + token + " of user:" + password + " may not subscribe"})
	_, err := be.Declare(ctxT(t), build(t, topology.New("echoes").DLQ()))
	if !errors.Is(err, pulsartopology.ErrDeclare) {
		t.Fatalf("Declare = %v, want an error wrapping ErrDeclare", err)
	}
	if !strings.Contains(err.Error(), "may not subscribe") {
		t.Errorf("Declare = %v, want the broker's refusal", err)
	}
	redacttest.NoSecret(t, "the declaration's error", err, password, token)
}

// echoingAdmin is an EvictionAdmin whose every answer is err: an admin
// API refusing the client's credentials and quoting them.
type echoingAdmin struct{ err error }

func (a echoingAdmin) MessageTTL(context.Context, string) (time.Duration, error) { return 0, a.err }

func (a echoingAdmin) BacklogQuotas(context.Context, string) ([]pulsartopology.BacklogQuota, error) {
	return nil, a.err
}

func (a echoingAdmin) SubscriptionExpiration(context.Context, string) (time.Duration, error) {
	return 0, a.err
}

// Guarantee: an admin API that refuses to report the policies with a
// message quoting the token and the password the client was created with
// shows neither in the WARN lines saying the policies could not be read;
// the lines keep the refusal.
func TestUnreadPoliciesWarningsShowNoCredential(t *testing.T) {
	const password, token = "pAssw0rd-in-URL-5e", "t0ken-SECRET-7a"
	b := testbroker.Pulsar(t)
	o := options(b, topic.Codec[string](topic.StringCodec{}))
	o.ServiceURL = strings.Replace(o.ServiceURL, "pulsar://", "pulsar://user:"+password+"@", 1)
	o.ClientOptions.Authentication = pulsar.NewAuthenticationToken(token)
	var lines logtest.Lines
	o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
	o.Admin = echoingAdmin{err: errors.New("401: token " + token + " of user:" + password + " may not read policies")}
	be := newBackend(t, o)
	if _, err := be.Declare(ctxT(t), build(t, topology.New("unread").ForConsumerGroup("g").Hold(time.Second).DLQ())); err != nil {
		t.Fatalf("Declare where policies cannot be read: %v", err)
	}
	lines.Want(t, 1, "WARN lines saying the TTLs could not be read", "level=WARN", pulsartopology.MsgTTLUnread, "may not read policies")
	lines.Want(t, 1, "WARN lines saying the eviction policies could not be read", "level=WARN", pulsartopology.MsgEvictionUnread, "may not read policies")
	for _, l := range lines.All() {
		redacttest.NoSecret(t, "a log line", l, password, token)
	}
}

// The options print the reconnection bound they give every reader, so
// that a log line of them tells whether a reader may give up.
func TestOptionsPrintTheirReconnectionBound(t *testing.T) {
	o := pulsartopology.Options[int]{MaxReconnectToBroker: 3}
	if got := fmt.Sprint(o); !strings.Contains(got, "maxReconnectToBroker: 3") {
		t.Fatalf("options print %s; want maxReconnectToBroker: 3", got)
	}
}
