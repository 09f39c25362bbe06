package pulsar

import (
	"errors"
	"fmt"
	"strings"

	"github.com/boulevard-go/boulevard/internal/redact"
)

// ErrSubscribe is wrapped by the *ConsumerError a stage fails with when a
// consumer cannot subscribe. The pipeline restarts the stage with backoff.
var ErrSubscribe = errors.New("pulsar: subscribe failed")

// ErrSubscribeTimeout is wrapped, with ErrSubscribe and
// context.DeadlineExceeded, by the error of a stage whose client did not
// return from subscribing a consumer within Options.SubscribeTimeout.
var ErrSubscribeTimeout = errors.New("pulsar: the client did not return from subscribing within the subscribe timeout")

// ErrTLSWithPlaintextURL is wrapped by the error of NewClient when its
// options hold TLS settings (TLSConfig, a trust, certificate or key file,
// TLSValidateHostname, cipher suites or TLS versions) and its service URL
// is one pulsar-client-go connects to in plaintext (pulsar://, http://):
// the client would ignore them and connect without TLS. Use
// pulsar+ssl:// (or https://).
var ErrTLSWithPlaintextURL = errors.New("pulsar: TLS settings with a service URL that is not pulsar+ssl:// or https://, on which the client connects in plaintext")

// ErrServiceURL is wrapped by the error of NewClient when the service URL
// holds user information (a password or token before an "@") and does not
// parse as pulsar-client-go reads URLs: a password with a raw "/", "?",
// "#", space or bad %-escape (percent-encode it), or a host or port that
// does not parse. NewClient then does not hand the URL to
// pulsar-client-go, which would write the parse error, whole URL
// included, to its process-wide logger; its error shows the URL with
// everything before the last "@" redacted.
var ErrServiceURL = errors.New("pulsar: the service URL does not parse (a password or token in it must be percent-encoded)")

// ErrConsumerClosed is wrapped by the *ConsumerError a stage fails with when
// one of its consumers was closed while the stage was running (by the
// client, or by code that got hold of it through ActiveState.Consumer). The
// pipeline restarts the stage, which closes its other consumers and
// subscribes new ones.
var ErrConsumerClosed = errors.New("pulsar: consumer closed while consuming")

// ErrReconnecting is wrapped by the error a stage shows as LastError while
// it is degraded (producer.StateDegraded) because one of its consumers
// keeps failing to reconnect to a broker (ReconnectFailuresToDegrade
// attempts in a row); the error carries the client's last failure.
var ErrReconnecting = errors.New("pulsar: a consumer cannot reconnect to its broker")

// ErrCallbackPanic is wrapped by *CallbackPanicError.
var ErrCallbackPanic = errors.New("pulsar: active state callback panicked")

// ConsumerError is why a producer stage's consumers were replaced.
type ConsumerError struct {
	// Stage is the index of the producer stage.
	Stage int
	// Broker is the service URL of the client, its user information
	// redacted, when the client was created with NewClient; empty otherwise.
	Broker string
	// Topic is the configured topic of the consumer that failed.
	Topic string
	// Subscription is the subscription name.
	Subscription string
	// Kind is ErrSubscribe or ErrConsumerClosed.
	Kind error
	// Err is the client's error, when it gave one.
	Err error
}

// Error names the stage, broker (when known), topic, subscription and
// cause, on one line: line breaks in the client's error are replaced and
// user information in any URL it names is redacted.
func (e *ConsumerError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v (stage %d", e.Kind, e.Stage)
	if e.Broker != "" {
		fmt.Fprintf(&b, ", broker %q", e.Broker)
	}
	fmt.Fprintf(&b, ", topic %q, subscription %q)", e.Topic, e.Subscription)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(redact.URL(redact.OneLine(e.Err.Error())))
	}
	return b.String()
}

// Unwrap returns Kind and, when there is one, the client's error.
func (e *ConsumerError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// CallbackPanicError is logged when Options.ActiveStateCallback panics. The
// panic is contained: the consumer keeps running.
type CallbackPanicError struct {
	// State is the report the callback was given.
	State ActiveState
	// Value is what the callback panicked with.
	Value any
	// Stack is the callback's stack at the panic.
	Stack []byte
}

// Error says which report the callback panicked on, and with what.
func (e *CallbackPanicError) Error() string {
	return redact.OneLine(fmt.Sprintf("%v on active=%t topic %q subscription %q: %v",
		ErrCallbackPanic, e.State.Active, e.State.Topic, e.State.Subscription, e.Value))
}

// Unwrap returns ErrCallbackPanic.
func (e *CallbackPanicError) Unwrap() error { return ErrCallbackPanic }

// ErrNotCreated is returned by Run, Validate and Info of a nil *Source:
// it has no options to run with. Its Stats are empty and Close returns
// nil. (A zero Source reports its missing options instead.) It matches
// the Kafka sources' kafka.ErrNotCreated in use.
var ErrNotCreated = errors.New("pulsar: source not made with New")

// ErrNilContext is returned by Run and Close for a nil context, before
// they do anything: Run subscribes nothing, and Close leaves the source
// open.
var ErrNilContext = errors.New("pulsar: nil context")

// ErrClientNotCreated is returned by every call of a zero *Client (one
// NewClient did not make, declared with var or as &Client{}) that would
// reach the broker: it has no pulsar-client-go client to call.
var ErrClientNotCreated = errors.New("pulsar: client not made with NewClient")
