package kafkarefusal

import (
	"errors"
	"fmt"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
)

// code16 is a client error carrying a Kafka error code, as sarama's KError
// does.
type code16 int16

func (c code16) Error() string { return fmt.Sprintf("code %d", int16(c)) }

func readCode16(err error) (int16, bool) {
	c, ok := err.(code16)
	return int16(c), ok
}

// Guarantee: Denied and RefusedForGood find a client's error code
// wherever it is wrapped (%w chains, joined errors, a metadata error
// naming several topics), so that an authorization refusal is classified
// whichever step of a client's lookup carried it; Denied takes only the
// authorization and SASL codes, RefusedForGood every code kerr says not to
// retry, and a retriable code or none is neither.
func TestRefusalClassifiesCodesWhereverWrapped(t *testing.T) {
	wrap := func(c *kerr.Error) error {
		return fmt.Errorf("listing: %w", errors.Join(code16(kerr.LeaderNotAvailable.Code), fmt.Errorf("t: %w", code16(c.Code))))
	}
	for _, tc := range []struct {
		err             error
		denied, forGood bool
	}{
		{wrap(kerr.TopicAuthorizationFailed), true, true},
		{wrap(kerr.GroupAuthorizationFailed), true, true},
		{wrap(kerr.ClusterAuthorizationFailed), true, true},
		{wrap(kerr.SaslAuthenticationFailed), true, true},
		{wrap(kerr.UnsupportedSaslMechanism), true, true},
		{wrap(kerr.IllegalSaslState), true, true},
		{wrap(kerr.InvalidRequest), false, true},
		{wrap(kerr.NotLeaderForPartition), false, false},
		{errors.New("connection refused"), false, false},
		{code16(0), false, false},
		{nil, false, false},
	} {
		if got := Denied(tc.err, readCode16); got != tc.denied {
			t.Errorf("Denied(%v) = %v, want %v", tc.err, got, tc.denied)
		}
		if got := RefusedForGood(tc.err, readCode16); got != tc.forGood {
			t.Errorf("RefusedForGood(%v) = %v, want %v", tc.err, got, tc.forGood)
		}
	}
}

// Guarantee: each client's adapter reads its own error type's code and
// nothing else, so that the same refusal is classified alike from sarama
// and from franz-go.
func TestClientsCodesAreReadAlike(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code Code
	}{
		{"sarama", fmt.Errorf("fetch: %w", sarama.ErrTopicAuthorizationFailed), Sarama},
		{"franz", fmt.Errorf("fetch: %w", kerr.TopicAuthorizationFailed), Franz},
	} {
		if !Denied(tc.err, tc.code) {
			t.Errorf("%s: Denied(%v) = false, want true", tc.name, tc.err)
		}
		if Denied(tc.err, readCode16) {
			t.Errorf("%s: another client's Code read %v as denied", tc.name, tc.err)
		}
	}
	if c, ok := Sarama(kerr.TopicAuthorizationFailed); ok {
		t.Errorf("Sarama read franz-go's error as code %d", c)
	}
	if c, ok := Franz(sarama.ErrTopicAuthorizationFailed); ok {
		t.Errorf("Franz read sarama's error as code %d", c)
	}
}

// Guarantee: FetchRefused takes every code Kafka says not to retry,
// authorization refusals included, but for UNKNOWN_SERVER_ERROR (which
// brokers send for passing faults) and OFFSET_OUT_OF_RANGE (which the
// clients' reset settings handle); a retriable code or none is not one.
func TestFetchRefusedLeavesOutPassingAndResetCodes(t *testing.T) {
	for _, tc := range []struct {
		code *kerr.Error
		want bool
	}{
		{kerr.UnsupportedCompressionType, true},
		{kerr.InvalidRecord, true},
		{kerr.UnsupportedVersion, true},
		{kerr.TopicAuthorizationFailed, true},
		{kerr.UnknownServerError, false},
		{kerr.OffsetOutOfRange, false},
		{kerr.CorruptMessage, false},
		{kerr.NotLeaderForPartition, false},
	} {
		err := fmt.Errorf("fetching: %w", code16(tc.code.Code))
		if got := FetchRefused(err, readCode16); got != tc.want {
			t.Errorf("FetchRefused(%v) = %v, want %v", tc.code, got, tc.want)
		}
	}
	if FetchRefused(code16(0), readCode16) || FetchRefused(nil, readCode16) {
		t.Error("FetchRefused holds for no error")
	}
}

// Guarantee: SaramaCorrupt takes a fetch that sarama could not decode (a
// PacketDecodingError, such as a CRC mismatch) and the broker's
// CORRUPT_MESSAGE, wherever wrapped (a ConsumerError included), and no
// connection error or other broker code, which sarama's retries may end.
func TestSaramaCorruptTakesUndecodableFetchesOnly(t *testing.T) {
	crc := sarama.PacketDecodingError{Info: "CRC didn't match expected 0x1 got 0x2"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{crc, true},
		{fmt.Errorf("fetch: %w", crc), true},
		{&sarama.ConsumerError{Topic: "t", Partition: 0, Err: crc}, true},
		{sarama.ErrInvalidMessage, true},
		{&sarama.ConsumerError{Topic: "t", Partition: 0, Err: sarama.ErrInvalidMessage}, true},
		{errors.Join(errors.New("other"), sarama.ErrInvalidMessage), true},
		{sarama.ErrNotConnected, false},
		{sarama.ErrNotLeaderForPartition, false},
		{sarama.ErrUnknown, false},
		{errors.New("read tcp: connection reset by peer"), false},
		{nil, false},
	} {
		if got := SaramaCorrupt(c.err); got != c.want {
			t.Errorf("SaramaCorrupt(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
