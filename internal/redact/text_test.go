package redact_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/redact"
	"github.com/boulevard-go/boulevard/internal/redact/redacttest"
)

// Guarantee: an error whose text carries a configured credential
// (whatever put it there: a broker, a client library), as written or
// URL-escaped, or a URL's user information, is reported with them
// replaced, on one line, and still unwraps to the original; an error that
// needs none of this is returned as it is.
func TestSecretsErrRemovesCredentials(t *testing.T) {
	c := sarama.NewConfig()
	c.Net.SASL.User = "alice"
	c.Net.SASL.Password = "pw/1234 x"
	s := redact.SaramaSecrets(c)
	orig := errors.New("auth failed for alice with pw/1234 x (pw%2F1234+x)\nretrying pulsar://bob:pw-99@h:1")
	got := s.Err(orig)
	for _, shown := range []string{"pw/1234", "pw%2F1234", "alice", "pw-99", "\n"} {
		if strings.Contains(got.Error(), shown) {
			t.Errorf("redacted error %q shows %q", got, shown)
		}
	}
	if !errors.Is(got, orig) {
		t.Fatal("redacted error does not unwrap to the original")
	}
	if s.Err(nil) != nil {
		t.Fatal("nil error redacted to non-nil")
	}
	if plain := errors.New("nothing secret"); s.Err(plain) != plain {
		t.Fatal("an error without credentials was rewrapped")
	}
	if got := redact.NewSecrets("ab").Text("ab cd"); got != "ab cd" {
		t.Errorf("a value shorter than 3 characters was taken out: %q", got)
	}
}

// Guarantee: a configured credential that holds another one (a token
// that contains a short password, a password that starts with the user
// name) is taken out whole, whichever order they were given in: no part
// of the longer one is left beside the mask.
func TestSecretsTextTakesOutACredentialHoldingAnotherWhole(t *testing.T) {
	const short, long = "abcd", "abcd-efgh-token"
	for _, s := range []redact.Secrets{redact.NewSecrets(short, long), redact.NewSecrets(long, short)} {
		got := s.Text("refused " + long + " and " + short)
		if want := "refused " + redact.Masked + " and " + redact.Masked; got != want {
			t.Errorf("Text = %q, want %q", got, want)
		}
	}
}

// refusal is an error held by value, as some client libraries return
// theirs: fmt prints its fields for %#v and %d.
type refusal struct{ text string }

func (r refusal) Error() string { return r.text }

// Guarantee: an error Err redacted prints with every fmt verb, logs and
// encodes without the credential, even where fmt would reach the original
// error's fields (%#v, %d) behind its message.
func TestSecretsErrPrintsNoCredentialWithAnyVerb(t *testing.T) {
	const secret = "pw-5e0c-secret"
	got := redact.NewSecrets(secret).Err(refusal{"login refused with " + secret})
	if !strings.Contains(got.Error(), "login refused with "+redact.Masked) {
		t.Fatalf("redacted error %q lost the refusal", got)
	}
	redacttest.NoSecret(t, "the redacted error", got, secret)
}

// Guarantee: a service URL's user information is hidden whole, even when
// it does not parse (a raw "/" in the password, an "@" in it), and a URL
// with a list of hosts, separated by "," or ";", keeps its user name.
func TestServiceURLHidesTheWholeUserInformation(t *testing.T) {
	for _, c := range []struct {
		raw, want string
		parses    bool
	}{
		{"pulsar://user:pw@h1:6650,h2", "pulsar://user:xxxxx@h1:6650,h2", true},
		{"pulsar://user:pw@h1:6650;h2", "pulsar://user:xxxxx@h1:6650;h2", true},
		{"pulsar://h:6650", "pulsar://h:6650", true},
		{"pulsar:/x//user:pw@h:6650", "pulsar:/x//xxxxx@h:6650", false},
		{"pulsar://user:p/w@rd@h:6650", "pulsar://xxxxx@h:6650", false},
		{"pulsar://user:p w@h:6650", "pulsar://xxxxx@h:6650", false},
	} {
		if got := redact.ServiceURL(c.raw); got != c.want {
			t.Errorf("ServiceURL(%q) = %q, want %q", c.raw, got, c.want)
		}
		if got := redact.UserInfoParses(c.raw); got != c.parses {
			t.Errorf("UserInfoParses(%q) = %t, want %t", c.raw, got, c.parses)
		}
	}
}

// Guarantee: Secrets take out a credential of 3 characters or more, in
// its query- and path-escaped forms too, and the Kerberos password of a
// sarama configuration; Text joins lines split by "\r" alone too.
func TestSecretsTakeOutEveryFormOfACredential(t *testing.T) {
	c := sarama.NewConfig()
	c.Net.SASL.GSSAPI.Password = "krb-5ecret"
	if got := redact.SaramaSecrets(c).Text("kinit with krb-5ecret"); got != "kinit with "+redact.Masked {
		t.Errorf("the Kerberos password left as %q", got)
	}
	s := redact.NewSecrets("abc", "p w/x")
	for in, want := range map[string]string{
		"user abc":                 "user " + redact.Masked,
		"query pw=p+w%2Fx":         "query pw=" + redact.Masked,
		"path /p%20w%2Fx/":         "path /" + redact.Masked + "/",
		"refused\rretrying as abc": "refused; retrying as " + redact.Masked,
	} {
		if got := s.Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}
