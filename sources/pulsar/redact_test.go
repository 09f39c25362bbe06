package pulsar_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/boulevard-go/boulevard/internal/logtest"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

const (
	password = "pw-0f9e8d"
	token    = "tok-7c6b5a"
)

// secretClient is a client made with a password in its URL and a token,
// never used to connect.
func secretClient(t *testing.T) *bpulsar.Client {
	t.Helper()
	c, err := bpulsar.NewClient(pulsar.ClientOptions{
		URL:            "pulsar://alice:" + password + "@127.0.0.1:1",
		Authentication: pulsar.NewAuthenticationToken(token),
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// noSecret fails when s shows the password or the token.
func noSecret(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(s, password) || strings.Contains(s, token) {
		t.Errorf("%s shows a secret: %s", what, s)
	}
}

// Options and the client that can hold credentials print, with every verb
// and through both slog handlers, without the URL's password or the token.
func TestCredentialsNeverPrinted(t *testing.T) {
	c := secretClient(t)
	opts := bpulsar.Options{Client: c, Topics: []string{"t"}, Subscription: "s",
		Consumer: pulsar.ConsumerOptions{DLQ: &pulsar.DLQPolicy{MaxDeliveries: 3}}}
	values := map[string]any{
		"Options":  opts,
		"*Options": &opts,
		"*Client":  c,
		"ConsumerError": &bpulsar.ConsumerError{Broker: c.ServiceURL(), Topic: "t", Kind: bpulsar.ErrSubscribe,
			Err: errors.New("lookup on pulsar://alice:" + password + "@127.0.0.1:1 failed")},
	}
	for name, v := range values {
		for _, verb := range []string{"%v", "%+v", "%s", "%q", "%#v"} {
			out := fmt.Sprintf(verb, v)
			noSecret(t, name+" with "+verb, out)
			if name != "ConsumerError" && verb != "%q" && !strings.Contains(out, "alice:xxxxx@127.0.0.1:1") {
				t.Errorf("%s with %s does not show the redacted URL: %s", name, verb, out)
			}
		}
		for hname, h := range map[string]func(*bytes.Buffer) slog.Handler{
			"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
			"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		} {
			var b bytes.Buffer
			slog.New(h(&b)).Info("options", slog.Any("value", v))
			noSecret(t, name+" through the "+hname+" handler", b.String())
		}
	}
	if got := fmt.Sprintf("%q", opts); !strings.HasPrefix(got, `"pulsar.Options{`) {
		t.Errorf("%%q of Options is not quoted: %s", got)
	}
}

// RedactURL takes the password, or user information without one, out of
// every URL in a text.
func TestRedactURL(t *testing.T) {
	cases := map[string]string{
		"pulsar://alice:pw@h:6650":            "pulsar://alice:xxxxx@h:6650",
		"pulsar+ssl://tok@h1:6651,h2:6651/":   "pulsar+ssl://xxxxx@h1:6651,h2:6651/",
		"a pulsar://u:p@h and http://v:q@w/x": "a pulsar://u:xxxxx@h and http://v:xxxxx@w/x",
		"pulsar://h:6650":                     "pulsar://h:6650",
		"mail alice@example.com":              "mail alice@example.com",
		"pulsar://alice:p@ss@h:6650/x":        "pulsar://alice:xxxxx@h:6650/x", // the last @ ends the user information, as for url.Parse
	}
	for in, want := range cases {
		if got := bpulsar.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// Guarantee: RedactServiceURL redacts one service URL as RedactURL does,
// and hides user information RedactURL cannot delimit (a raw "/", "?",
// "#" or space in a password) up to the URL's last "@".
func TestRedactServiceURL(t *testing.T) {
	for in, want := range map[string]string{
		"pulsar://alice:pw@h:6650":       "pulsar://alice:xxxxx@h:6650",
		"pulsar+ssl://tok@h1:6651,h2:66": "pulsar+ssl://xxxxx@h1:6651,h2:66",
		"pulsar://h:6650":                "pulsar://h:6650",
		"pulsar://alice:p/w@h:6650":      "pulsar://xxxxx@h:6650",
		"pulsar://alice:p?w#x@h:6650":    "pulsar://xxxxx@h:6650",
		"http://alice:p w@h:8080/admin":  "http://xxxxx@h:8080/admin",
		"alice:pw@h:6650":                "xxxxx@h:6650",
	} {
		if got := bpulsar.RedactServiceURL(in); got != want {
			t.Errorf("RedactServiceURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// pulsar-client-go logs its service URL on many lines (at debug level);
// through ClientLogger the password never shows, Info becomes Debug, and a
// multi-line message stays on one line.
func TestClientLoggerRedacts(t *testing.T) {
	var b bytes.Buffer
	l := bpulsar.ClientLogger(slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})))
	url := "pulsar://alice:" + password + "@127.0.0.1:1"
	sub := l.SubLogger(plog.Fields{"serviceURL": url})
	sub.Debugf("connecting to %s", url)
	sub.Info("Connecting to broker")
	sub.WithError(errors.New("dial " + url + ": refused\nretrying")).Warn("Failed to connect to broker.")
	out := b.String()
	noSecret(t, "client log", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 log lines, got %d:\n%s", len(lines), out)
	}
	if !strings.Contains(lines[1], `"level":"DEBUG"`) || !strings.Contains(lines[2], `"level":"WARN"`) {
		t.Errorf("levels not mapped (Info to Debug, Warn kept):\n%s", out)
	}
	if !strings.Contains(out, "alice:xxxxx@127.0.0.1:1") {
		t.Errorf("the redacted URL is missing:\n%s", out)
	}
}

// A client that cannot be created reports why without the password.
func TestNewClientErrorRedacted(t *testing.T) {
	_, err := bpulsar.NewClient(pulsar.ClientOptions{URL: "ftp://alice:" + password + "@h:1", OperationTimeout: time.Second}, nil)
	if err == nil {
		t.Fatal("a client with an unknown scheme was created")
	}
	noSecret(t, "NewClient error", err.Error())
}

// Guarantee: NewClient refuses TLS settings given with a service URL that
// pulsar-client-go connects to in plaintext (pulsar://, http://), which
// would ignore them, with an error wrapping ErrTLSWithPlaintextURL that
// shows no password; with pulsar+ssl:// the same settings make a client.
func TestNewClientRefusesTLSSettingsOnAPlaintextURL(t *testing.T) {
	settings := map[string]pulsar.ClientOptions{
		"TLSConfig":             {TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12}},
		"TLSTrustCertsFilePath": {TLSTrustCertsFilePath: "/etc/ssl/ca.pem"},
		"TLSCertificateFile":    {TLSCertificateFile: "client.pem", TLSKeyFilePath: "client-key.pem"},
		"TLSValidateHostname":   {TLSValidateHostname: true},
	}
	for name, o := range settings {
		for _, url := range []string{"pulsar://alice:" + password + "@127.0.0.1:1", "http://127.0.0.1:1", "PULSAR://127.0.0.1:1"} {
			o.URL = url
			c, err := bpulsar.NewClient(o, slog.New(slog.DiscardHandler))
			if err == nil {
				c.Close()
				t.Errorf("%s with %s: NewClient made a client that would connect in plaintext", name, url)
				continue
			}
			if !errors.Is(err, bpulsar.ErrTLSWithPlaintextURL) {
				t.Errorf("%s with %s: NewClient = %v, want an error wrapping ErrTLSWithPlaintextURL", name, url, err)
			}
			noSecret(t, "NewClient error", err.Error())
		}
		o.URL = "pulsar+ssl://127.0.0.1:1"
		c, err := bpulsar.NewClient(o, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Errorf("%s with %s: %v", name, o.URL, err)
			continue
		}
		c.Close()
	}
}

// Guarantee: a service URL whose user information does not parse as
// pulsar-client-go reads URLs (a password with a raw "/", "?", "#", space
// or bad escape, or a host that does not parse after it) fails NewClient
// with an error wrapping ErrServiceURL, and neither that error nor any
// line of the client's logger shows the password or any part of it after
// its first character. (pulsar-client-go, given such a URL, writes the parse error with
// the whole URL to its process-wide logrus logger, and RedactURL cannot
// tell where such user information ends.)
func TestNewClientKeepsAPasswordThatDoesNotParseSecret(t *testing.T) {
	const tail = "0f9e8d"
	for _, pw := range []string{"p/" + tail, "p?" + tail, "p#" + tail, "p " + tail, "p%zz" + tail} {
		for _, url := range []string{"pulsar://alice:" + pw + "@127.0.0.1:1", "pulsar+ssl://" + pw + "@127.0.0.1:1", "http://alice:" + pw + "@127.0.0.1:1"} {
			var lines logtest.Lines
			c, err := bpulsar.NewClient(pulsar.ClientOptions{URL: url}, slog.New(slog.NewTextHandler(&lines, &slog.HandlerOptions{Level: slog.LevelDebug})))
			if err == nil {
				c.Close()
				t.Errorf("%q: NewClient made a client", url)
				continue
			}
			if !errors.Is(err, bpulsar.ErrServiceURL) {
				t.Errorf("%q: NewClient = %v, want an error wrapping ErrServiceURL", url, err)
			}
			for _, s := range append(lines.All(), err.Error()) {
				if strings.Contains(s, tail) {
					t.Errorf("%q: a password shows: %s", url, s)
				}
			}
		}
	}
	// A host that does not parse, after a password that does.
	_, err := bpulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://alice:" + password + "@127.0.0.1:66x0"}, slog.New(slog.DiscardHandler))
	if !errors.Is(err, bpulsar.ErrServiceURL) {
		t.Errorf("NewClient = %v, want an error wrapping ErrServiceURL", err)
	}
	noSecret(t, "NewClient error", fmt.Sprint(err))
}

// Guarantee: a broker refusal that echoes the client's credentials (the
// token of its Authentication, the password of its service URL) shows
// them in no error the pipeline returns and no line the pipeline, the
// source or the client logs; the error still unwraps to ErrSubscribe and
// names the broker with its URL redacted.
func TestRefusalEchoingCredentialsShowsNone(t *testing.T) {
	e := newEnv(t)
	var lines logtest.Lines
	logger := slog.New(slog.NewTextHandler(&lines, &slog.HandlerOptions{Level: slog.LevelDebug}))
	url := strings.Replace(e.broker.URL(), "pulsar://", "pulsar://alice:"+password+"@", 1)
	c, err := bpulsar.NewClient(pulsar.ClientOptions{URL: url, Authentication: pulsar.NewAuthenticationToken(token),
		OperationTimeout: 5 * time.Second}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e.broker.RefuseSubscribe("echo", "sub", &pulsartest.ServerError{Code: pulsartest.AuthorizationError,
		Message: "token " + token + " of alice:" + password + " may not subscribe"})
	src := bpulsar.New(bpulsar.Options{Client: c, Topics: []string{"echo"}, Subscription: "sub", Logger: logger})
	err = runUntilGivenUp(t, "echo", src, 1, logger)
	if !errors.Is(err, bpulsar.ErrSubscribe) {
		t.Fatalf("Run = %v, want an error wrapping ErrSubscribe", err)
	}
	if !strings.Contains(err.Error(), "may not subscribe") || !strings.Contains(err.Error(), "alice:xxxxx@") {
		t.Errorf("Run = %v, want the broker's refusal and the redacted broker URL", err)
	}
	noSecret(t, "the pipeline's error", err.Error())
	if len(lines.All()) == 0 {
		t.Fatal("nothing was logged: the check would prove nothing")
	}
	for _, l := range lines.All() {
		noSecret(t, "a log line", l)
	}
}
