package redact

import (
	"fmt"
	neturl "net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/IBM/sarama"
)

// Masked is what Secrets.Text writes in place of a configured credential.
const Masked = "[redacted]"

// userInfo matches the user information of every URL in a text: up to the
// last "@" of the authority, as url.Parse reads it, so that a password
// holding an "@" is hidden whole.
var userInfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)([^/?#\s]*)@`)

// URL returns s with the user information of every URL in it replaced:
// "pulsar://user:secret@host" becomes "pulsar://user:xxxxx@host", and
// "pulsar+ssl://token@host" becomes "pulsar+ssl://xxxxx@host".
func URL(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return userInfo.ReplaceAllStringFunc(s, func(m string) string {
		sub := userInfo.FindStringSubmatch(m)
		if user, _, ok := strings.Cut(sub[2], ":"); ok {
			return sub[1] + user + ":xxxxx@"
		}
		return sub[1] + "xxxxx@"
	})
}

// ServiceURL returns raw, one service URL, with its user information
// redacted as URL redacts it, or, when that user information does not
// parse (a password with a raw "/", "?", "#" or space, which URL cannot
// delimit; see UserInfoParses), with everything between the "//" (or the
// start) and the last "@" replaced: "pulsar://user:p/w@host" becomes
// "pulsar://xxxxx@host".
func ServiceURL(raw string) string {
	if UserInfoParses(raw) {
		return URL(raw)
	}
	start := 0
	if i := strings.Index(raw, "//"); i >= 0 {
		start = i + 2
	}
	at := strings.LastIndexByte(raw[start:], '@')
	return raw[:start] + "xxxxx" + raw[start+at:]
}

// UserInfoParses reports whether raw, a service URL, holds no user
// information (no "@" after its "//"), or holds user information that a
// client parses and URL then finds whole: the last "@" is within the
// authority (no raw "/", "?" or "#" before it) and the URL, reduced to its
// first host (of a list separated by "," or ";"), parses with net/url (no
// space or bad escape in the user information, a host and port that
// parse).
func UserInfoParses(raw string) bool {
	i := strings.Index(raw, "//")
	start := i + 2
	if i < 0 {
		start = 0
	}
	rest := raw[start:]
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return true
	}
	end := strings.IndexAny(rest, "/?#")
	if i < 0 || (end >= 0 && end < at) {
		return false
	}
	hosts, suffix := rest[at+1:], ""
	if end >= 0 {
		hosts, suffix = rest[at+1:end], rest[end:]
	}
	if j := strings.IndexAny(hosts, ",;"); j >= 0 {
		hosts = hosts[:j]
	}
	u, err := neturl.Parse(raw[:start] + rest[:at+1] + hosts + suffix)
	return err == nil && u.User != nil
}

// OneLine joins the lines of s with "; ", leaving out empty ones, so that
// an error or log message stays on one line ("a\nb\n" becomes "a; b").
func OneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
}

// minSecret is the shortest configured value Secrets takes out of text:
// a shorter one would take out parts of ordinary words.
const minSecret = 3

// Secrets are the credentials a client was configured with, taken out of
// any text that reaches an error or a log line, whatever put them there (a
// broker echoing a refused login, a client library quoting its
// configuration). The zero value holds none: its Text still redacts the
// user information of URLs and joins lines.
type Secrets struct{ values []string }

// NewSecrets returns the secrets among values: those of at least 3
// characters, each also in its URL-escaped forms when they differ. A
// shorter value is not taken out of any text. Text replaces the longest
// first, so that a secret holding another one is taken out whole.
func NewSecrets(values ...string) Secrets {
	var s Secrets
	for _, v := range values {
		if len(v) < minSecret {
			continue
		}
		s.values = append(s.values, v)
		for _, e := range []string{neturl.QueryEscape(v), neturl.PathEscape(v)} {
			if e != v {
				s.values = append(s.values, e)
			}
		}
	}
	slices.SortStableFunc(s.values, func(a, b string) int { return len(b) - len(a) })
	return s
}

// SaramaSecrets returns the credentials of a sarama configuration: the
// SASL user and password and the Kerberos password. A nil c holds none.
func SaramaSecrets(c *sarama.Config) Secrets {
	if c == nil {
		return Secrets{}
	}
	return NewSecrets(c.Net.SASL.Password, c.Net.SASL.User, c.Net.SASL.GSSAPI.Password)
}

// Text returns t on one line (OneLine), with the user information of its
// URLs redacted (URL) and every secret replaced by Masked.
func (s Secrets) Text(t string) string {
	t = URL(OneLine(t))
	for _, v := range s.values {
		t = strings.ReplaceAll(t, v, Masked)
	}
	return t
}

// Err returns err itself when Text leaves its message as it is, and
// otherwise an error with the message Text returns, printed as that
// message with every fmt verb, that unwraps to err (errors.Is and
// errors.As still find what err wraps). A nil err stays
// nil.
func (s Secrets) Err(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := s.Text(msg)
	if clean == msg {
		return err
	}
	return &cleanError{msg: clean, err: err}
}

// cleanError shows a message with the credentials taken out, and unwraps
// to the original error.
type cleanError struct {
	msg string
	err error
}

func (e *cleanError) Error() string { return e.msg }
func (e *cleanError) Unwrap() error { return e.err }

// Format writes the message for every verb, so that none (%#v, %d)
// reaches the original error behind it.
func (e *cleanError) Format(f fmt.State, verb rune) { Format(f, verb, e.msg) }
