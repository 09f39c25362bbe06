package kafka

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/boulevard-go/boulevard/internal/redact"
)

// String describes the options with every credential left out: of Config
// it shows only the protocol version, the client id and whether TLS and
// SASL are enabled (with the SASL mechanism), never the SASL user,
// password, SCRAM or OAuth settings, nor TLS keys. fmt's %v, %+v, %s and
// %q print this; %#v prints GoString.
func (o Options) String() string {
	var b strings.Builder
	b.WriteString("kafka.Options{")
	fmt.Fprintf(&b, "Brokers:%q GroupID:%q Topics:%q", o.Brokers, o.GroupID, o.Topics)
	if o.InitialOffset != "" {
		fmt.Fprintf(&b, " InitialOffset:%q", o.InitialOffset)
	}
	if !o.StartTime.IsZero() {
		fmt.Fprintf(&b, " StartTime:%s", o.StartTime.Format(time.RFC3339Nano))
	}
	if o.BeginOffset != "" {
		fmt.Fprintf(&b, " BeginOffset:%q", o.BeginOffset)
	}
	if o.CommitMode != "" {
		fmt.Fprintf(&b, " CommitMode:%q", o.CommitMode)
	}
	if o.Rebalance != "" {
		fmt.Fprintf(&b, " Rebalance:%q", o.Rebalance)
	}
	if o.CommitInterval != 0 {
		fmt.Fprintf(&b, " CommitInterval:%s", o.CommitInterval)
	}
	if o.FailurePolicy != "" {
		fmt.Fprintf(&b, " FailurePolicy:%q", string(o.FailurePolicy))
	}
	if o.RedeliveryBackoff != 0 {
		fmt.Fprintf(&b, " RedeliveryBackoff:%s", o.RedeliveryBackoff)
	}
	if o.RevokeTimeout != 0 {
		fmt.Fprintf(&b, " RevokeTimeout:%s", o.RevokeTimeout)
	}
	if o.ConnectTimeout != 0 {
		fmt.Fprintf(&b, " ConnectTimeout:%s", o.ConnectTimeout)
	}
	if o.Unordered {
		b.WriteString(" Unordered:true")
	}
	if o.Config != nil {
		b.WriteString(" Config:")
		b.WriteString(redact.SaramaConfig(o.Config))
	}
	b.WriteString("}")
	return b.String()
}

// GoString is String: the options never print their credentials, not
// even with %#v.
func (o Options) GoString() string { return o.String() }

// Format prints String for every verb (quoted for %q, GoString for %#v),
// so that no verb reaches Config's fields.
func (o Options) Format(f fmt.State, verb rune) {
	redact.Format(f, verb, o.String())
}

// LogValue logs the options as a group of their non-secret fields (the
// same as String).
func (o Options) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.Any("brokers", o.Brokers),
		slog.String("group_id", o.GroupID),
		slog.Any("topics", o.Topics),
		slog.String("initial_offset", o.InitialOffset),
		slog.Time("start_time", o.StartTime),
		slog.String("begin_offset", o.BeginOffset),
		slog.String("commit_mode", o.CommitMode),
		slog.String("rebalance", o.Rebalance),
		slog.Duration("commit_interval", o.CommitInterval),
		slog.String("failure_policy", string(o.FailurePolicy)),
		slog.Duration("redelivery_backoff", o.RedeliveryBackoff),
		slog.Duration("revoke_timeout", o.RevokeTimeout),
		slog.Duration("connect_timeout", o.ConnectTimeout),
		slog.Bool("unordered", o.Unordered),
	}
	if c := o.Config; c != nil {
		attrs = append(attrs, slog.Group("config",
			slog.String("version", c.Version.String()),
			slog.String("client_id", c.ClientID),
			slog.Bool("tls", c.Net.TLS.Enable),
			slog.Bool("sasl", c.Net.SASL.Enable),
			slog.String("sasl_mechanism", string(c.Net.SASL.Mechanism))))
	}
	return slog.GroupValue(attrs...)
}

// MarshalJSON encodes the options as String does, so that a structure
// holding them (logged by a JSON handler, for instance) does not encode
// Config's credentials.
func (o Options) MarshalJSON() ([]byte, error) { return json.Marshal(o.String()) }

// String describes the source by its options, credentials left out.
func (s *Source) String() string {
	if s == nil {
		return "kafka.Source(nil)"
	}
	return "kafka.Source(" + s.opts.String() + ")"
}

// GoString is String.
func (s *Source) GoString() string { return s.String() }

// Format prints String for every verb (quoted for %q), so that no verb
// reaches the credentials the source keeps to redact its errors and logs.
func (s *Source) Format(f fmt.State, verb rune) { redact.Format(f, verb, s.String()) }

// LogValue logs the source's options, credentials left out.
func (s *Source) LogValue() slog.Value {
	if s == nil {
		return slog.StringValue(s.String())
	}
	return s.opts.LogValue()
}
