package kafkatopic

import (
	"errors"
	"strings"
	"testing"

	"github.com/IBM/sarama"
)

// An error whose text carries a configured credential (whatever put it
// there: a broker, a client library) is reported with it replaced, on one
// line, and still unwraps to the original.
func TestRedactorRemovesCredentials(t *testing.T) {
	c := sarama.NewConfig()
	c.Net.SASL.User = "alice"
	c.Net.SASL.Password = "pw-1234"
	r := newRedactor(c)
	orig := errors.New("auth failed for alice with pw-1234\nretrying")
	got := r.err(orig)
	if strings.Contains(got.Error(), "pw-1234") || strings.Contains(got.Error(), "alice") || strings.Contains(got.Error(), "\n") {
		t.Fatalf("redacted error %q", got)
	}
	if !errors.Is(got, orig) {
		t.Fatal("redacted error does not unwrap to the original")
	}
	if r.err(nil) != nil {
		t.Fatal("nil error redacted to non-nil")
	}
	plain := errors.New("nothing secret")
	if r.err(plain) != plain {
		t.Fatal("an error without credentials was rewrapped")
	}
}
