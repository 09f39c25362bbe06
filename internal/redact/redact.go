// Package redact prints values that hold credentials as a description of
// what is safe to show. fmt reaches the fields behind a String method with
// every verb String does not cover (%d, %x), and with %s or %q it prints
// what a pointer field points to: a type whose fields hold credentials
// formats through Format for every verb.
package redact

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// Format writes s for every verb, quoted for %q.
func Format(f fmt.State, verb rune, s string) {
	if verb == 'q' {
		s = strconv.Quote(s)
	}
	_, _ = f.Write([]byte(s))
}

// SaramaConfig describes what of a sarama configuration is safe to print:
// the protocol version, the client id, whether TLS and SASL are on and the
// SASL mechanism, never the SASL user and password, the SCRAM or OAuth
// settings nor TLS keys.
func SaramaConfig(c *sarama.Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{Version:%s ClientID:%q TLS:%t SASL:%t", c.Version, c.ClientID, c.Net.TLS.Enable, c.Net.SASL.Enable)
	if c.Net.SASL.Enable {
		fmt.Fprintf(&b, " SASLMechanism:%q", string(c.Net.SASL.Mechanism))
	}
	if c.Net.SASL.Enable || c.Net.TLS.Config != nil {
		b.WriteString(" credentials:redacted")
	}
	b.WriteString("}")
	return b.String()
}

// Fields writes the fields of a structure's description, each as
// " Name:value", leaving out those at their zero value.
type Fields struct{ strings.Builder }

// Duration writes a duration field unless d is 0.
func (f *Fields) Duration(name string, d time.Duration) {
	if d != 0 {
		fmt.Fprintf(f, " %s:%s", name, d)
	}
}

// Int writes an integer field unless v is 0.
func (f *Fields) Int(name string, v int64) {
	if v != 0 {
		fmt.Fprintf(f, " %s:%d", name, v)
	}
}

// Quoted writes a string field, quoted, unless v is empty.
func (f *Fields) Quoted(name, v string) {
	if v != "" {
		fmt.Fprintf(f, " %s:%q", name, v)
	}
}

// Config writes a sarama configuration as SaramaConfig describes it,
// unless c is nil.
func (f *Fields) Config(c *sarama.Config) {
	if c != nil {
		f.WriteString(" Config:" + SaramaConfig(c))
	}
}
