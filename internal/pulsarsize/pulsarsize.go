// Package pulsarsize recognises pulsar-client-go's refusal of a message
// larger than the broker takes, so that Boulevard's Pulsar backends report
// it in one way: an error that wraps pulsar.ErrMessageTooLarge and says
// what to do.
//
// pulsar-client-go (v0.21.0) refuses such a message with
// pulsar.ErrMessageTooLarge when it checks the message alone, but with an
// error of its internal package ("encryptedPayload exceeds
// MaxMessageSize, size: …") when it finds it out while flushing a batch,
// and with pulsar.ErrMetaTooLarge for metadata (properties) alone too
// large; the last two do not wrap the first.
package pulsarsize

import (
	"errors"
	"strings"

	"github.com/apache/pulsar-client-go/pulsar"
)

// Refusal returns err unchanged unless it is the client's refusal of a
// message larger than the broker's maxMessageSize; then it returns an
// error that wraps both pulsar.ErrMessageTooLarge and err, whose text is
// err's followed by what to do.
func Refusal(err error) error {
	if err == nil || !tooLarge(err) {
		return err
	}
	return &refusal{err: err}
}

// tooLarge reports whether err is the client's refusal of a message over
// the broker's size, by its sentinels or, for the internal error of a
// batch, by the words all of them share.
func tooLarge(err error) bool {
	return errors.Is(err, pulsar.ErrMessageTooLarge) || errors.Is(err, pulsar.ErrMetaTooLarge) ||
		strings.Contains(err.Error(), "exceeds MaxMessageSize")
}

type refusal struct{ err error }

func (r *refusal) Error() string {
	return r.err.Error() + ": the message, its key, headers and properties included, is larger than the broker's maxMessageSize " +
		"(5 MiB unless the broker sets it): send a smaller one, or raise maxMessageSize on the brokers"
}

func (r *refusal) Unwrap() []error { return []error{pulsar.ErrMessageTooLarge, r.err} }
