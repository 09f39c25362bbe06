package pulsarsize

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
)

// Guarantee: every way pulsar-client-go refuses a message over the
// broker's size becomes an error that wraps pulsar.ErrMessageTooLarge and
// the client's own error, and says what to do; any other error is left
// as it is.
func TestRefusalRecognisesEveryTooLargeErrorOfTheClient(t *testing.T) {
	batched := errors.New("encryptedPayload exceeds MaxMessageSize, size: 6291656, MaxMessageSize: 5242880")
	for _, err := range []error{
		pulsar.ErrMessageTooLarge,
		pulsar.ErrMetaTooLarge,
		batched,
		fmt.Errorf("send: %w", batched),
	} {
		got := Refusal(err)
		if !errors.Is(got, pulsar.ErrMessageTooLarge) || !errors.Is(got, err) {
			t.Errorf("Refusal(%q) = %q, want it to wrap pulsar.ErrMessageTooLarge and the client's error", err, got)
		}
		if !strings.HasPrefix(got.Error(), err.Error()) || !strings.Contains(got.Error(), "raise maxMessageSize") {
			t.Errorf("Refusal(%q) says %q, want the client's words and what to do", err, got)
		}
	}
	for _, err := range []error{nil, pulsar.ErrSendTimeout, errors.New("connection closed")} {
		if got := Refusal(err); got != err {
			t.Errorf("Refusal(%v) = %v, want it unchanged", err, got)
		}
	}
}
