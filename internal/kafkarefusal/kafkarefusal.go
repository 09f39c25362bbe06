// Package kafkarefusal tells Kafka's refusals for good from passing
// errors, for every Kafka client the project uses (sarama, franz-go):
// one table of codes, read through each client's own error type.
package kafkarefusal

import (
	"errors"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Code is how one Kafka client's error carries the error code a broker
// answered with: sarama's KError, franz-go's *kerr.Error. It reports
// false for an error that is not such a value (it is not asked about the
// errors that one wraps).
type Code func(err error) (code int16, ok bool)

// deniedCodes are the codes with which Kafka refuses a client's
// credentials or its permissions on a topic, the group or the cluster.
var deniedCodes = [...]int16{
	kerr.TopicAuthorizationFailed.Code,
	kerr.GroupAuthorizationFailed.Code,
	kerr.ClusterAuthorizationFailed.Code,
	kerr.SaslAuthenticationFailed.Code,
	kerr.UnsupportedSaslMechanism.Code,
	kerr.IllegalSaslState.Code,
}

// DeniedCode reports whether code is one with which Kafka refuses the
// client's credentials or its permissions: asking again changes nothing
// until an operator does.
func DeniedCode(code int16) bool {
	for _, d := range deniedCodes {
		if code == d {
			return true
		}
	}
	return false
}

// RefusedForGoodCode reports whether code is an error Kafka says not to
// retry: its kerr.Error has Retriable false, the table the franz-go
// client follows (an unknown code is kerr's UNKNOWN_SERVER_ERROR, not
// retriable either). No error (0) is not refused.
func RefusedForGoodCode(code int16) bool {
	if code == 0 {
		return false
	}
	k, ok := kerr.ErrorForCode(code).(*kerr.Error)
	return ok && !k.Retriable
}

// FetchRefusedCode reports whether code, a Fetch answer's error for a
// partition, is one to stop fetching for: a code of RefusedForGoodCode
// other than UNKNOWN_SERVER_ERROR, which brokers also send for passing
// faults (fetched again), and OFFSET_OUT_OF_RANGE, which the clients
// handle by their reset setting. An authorization refusal is one
// (DeniedCode tells it apart).
func FetchRefusedCode(code int16) bool {
	return code != kerr.UnknownServerError.Code && code != kerr.OffsetOutOfRange.Code && RefusedForGoodCode(code)
}

// FetchRefused reports whether err, or any error it wraps, carries a code
// of FetchRefusedCode as code reads it.
func FetchRefused(err error, code Code) bool {
	return carries(err, code, FetchRefusedCode)
}

// Denied reports whether err, or any error it wraps (as errors.Is walks
// them, joined errors included), carries a code of DeniedCode as code
// reads it: whichever step asked (a join, a metadata or leader lookup, a
// ListOffsets or Fetch answer), the refusal is for good. The sources and
// the admin helpers classify their client's errors with it.
func Denied(err error, code Code) bool {
	return carries(err, code, DeniedCode)
}

// RefusedForGood reports whether err, or any error it wraps, carries a
// code of RefusedForGoodCode as code reads it.
func RefusedForGood(err error, code Code) bool {
	return carries(err, code, RefusedForGoodCode)
}

// carries reports whether err's tree holds an error whose code matches.
func carries(err error, code Code, match func(int16) bool) bool {
	for err != nil {
		if c, ok := code(err); ok && match(c) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if carries(e, code, match) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// SaramaCorrupt reports whether err, a sarama partition consumer's fetch
// error (or an error wrapping one), says the fetched bytes cannot be
// decoded: sarama could not decode the broker's Fetch answer (a
// sarama.PacketDecodingError: a batch whose CRC does not match, a length
// or a compression codec that does not hold), or the broker answered
// CORRUPT_MESSAGE (sarama.ErrInvalidMessage), which it does for a log
// segment it cannot read. Each fetch from the same offset fails alike,
// so sarama's retries never end it; skipping the batch would lose its
// records. Kafka's Java consumer stops there with an error.
func SaramaCorrupt(err error) bool {
	var pde sarama.PacketDecodingError
	return errors.As(err, &pde) || errors.Is(err, sarama.ErrInvalidMessage)
}

// Sarama is the Code of sarama's errors (sarama.KError).
func Sarama(err error) (int16, bool) {
	k, ok := err.(sarama.KError)
	return int16(k), ok
}

// Franz is the Code of franz-go's errors (*kerr.Error).
func Franz(err error) (int16, bool) {
	if k, ok := err.(*kerr.Error); ok {
		return k.Code, true
	}
	return 0, false
}
