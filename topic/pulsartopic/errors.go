package pulsartopic

import (
	"errors"
	"fmt"
	"strings"

	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
)

// ErrPartitionMismatch is wrapped by the [*PartitionError] returned when a
// topic exists on the broker with another partition count than the options
// ask for.
var ErrPartitionMismatch = errors.New("pulsartopic: partition count mismatch")

// ErrNoAdmin is returned when a partitioned topic does not exist and
// Options.Admin is nil, so the backend cannot create it.
var ErrNoAdmin = errors.New("pulsartopic: partitioned topic does not exist and no Admin is set to create it")

// ErrConnect is wrapped, with the call's own cause, by the *Error of a
// topic's declaration (its partition lookup, its producer's creation), or
// of a Subscribe to a declared topic (its consumer's creation), that
// failed while the client could not reach the broker, or while the broker
// refused its credentials: the error names the broker's service URL,
// without its user information, and the client's latest connection
// failure ("connection refused", "Failed to authenticate"). Only a client made by
// sources/pulsar's NewClient (as the backend's own is) tells its
// connection failures.
var ErrConnect = errors.New("pulsartopic: cannot connect to the Pulsar broker")

// ErrBackendClosed is returned by NewTopic after the backend's Close.
var ErrBackendClosed = errors.New("pulsartopic: backend closed")

// ErrConsumerClosed is wrapped, with the client's cause, by the *Error a
// subscription's Receive returns once pulsar-client-go closed its consumer
// by itself: it gave up reconnecting, or the broker refused the consumer
// for good (a deleted topic or subscription, a revoked authorization), or
// the application closed the client the backend uses. The subscription
// receives nothing more; close it and subscribe again (a topic source
// does so when its stage restarts).
var ErrConsumerClosed = errors.New("pulsartopic: the client closed the subscription's consumer")

// PartitionError reports a topic whose partition count on the broker is
// not the one the options ask for. It wraps [ErrPartitionMismatch].
type PartitionError struct {
	// Topic is the full Pulsar topic name.
	Topic string
	// Have is the count on the broker (0: not partitioned); Want the count
	// Options.Partitions asks for.
	Have, Want int
}

// Error names the topic and both counts.
func (e *PartitionError) Error() string {
	return fmt.Sprintf("pulsartopic: topic %q has %d partitions on the broker, options ask for %d", e.Topic, e.Have, e.Want)
}

// Unwrap returns ErrPartitionMismatch.
func (e *PartitionError) Unwrap() error { return ErrPartitionMismatch }

// Error is an error from the broker or the client, with what the backend
// was doing. Its message never holds a URL's user information nor a line
// break, nor, when the backend's client was made by sources/pulsar's
// NewClient (as it is with Options.ServiceURL), the token or password the
// client was created with; Unwrap returns the client's error (through a
// redacting wrapper when its message had to change).
type Error struct {
	// Op is what failed, for example "create producer".
	Op string
	// Topic is the full Pulsar topic name.
	Topic string
	// Err is the cause.
	Err error
}

// Error returns "pulsartopic: <op> <topic>: <cause>".
func (e *Error) Error() string {
	s := "pulsartopic: " + e.Op + " " + fmt.Sprintf("%q", e.Topic) + ": " + spulsar.RedactURL(e.Err.Error())
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r\n", "; ", "\n", "; ", "\r", "; ").Replace(s)
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// fail returns the *Error of op on the topic full, its cause err passed
// through the client's redaction (sources/pulsar's RedactError): a broker
// that echoes the token or password the client was created with, in the
// refusal the client reports, does not show them.
func (b *Backend[T]) fail(op, full string, err error) *Error {
	return &Error{Op: op, Topic: full, Err: spulsar.RedactError(b.client, err)}
}
