package pulsar_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
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
