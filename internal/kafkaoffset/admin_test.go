package kafkaoffset_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
)

// Guarantee: refusals of credentials or permissions are told apart from
// passing errors, also when wrapped.
func TestDeniedTellsRefusalsFromPassingErrors(t *testing.T) {
	for _, err := range []error{sarama.ErrGroupAuthorizationFailed, sarama.ErrTopicAuthorizationFailed,
		sarama.ErrClusterAuthorizationFailed, sarama.ErrSASLAuthenticationFailed,
		fmt.Errorf("joining: %w", sarama.ErrGroupAuthorizationFailed)} {
		if !kafkaoffset.Denied(err) {
			t.Errorf("Denied(%v) = false, want true", err)
		}
	}
	for _, err := range []error{nil, sarama.ErrNotCoordinatorForConsumer, sarama.ErrOffsetsLoadInProgress,
		sarama.ErrOutOfBrokers, context.DeadlineExceeded, errors.New("connection reset")} {
		if kafkaoffset.Denied(err) {
			t.Errorf("Denied(%v) = true, want false", err)
		}
	}
}

// Guarantee: Poll retries passing errors until try is done, stops at once
// on a refusal, and when its context ends reports the last error seen
// beside the context's, so a timeout says what kept failing.
func TestPollRetriesPassingErrorsAndStopsOnRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		calls := 0
		err := kafkaoffset.Poll(ctx, func() (bool, error) {
			calls++
			if calls < 4 {
				return false, sarama.ErrOffsetsLoadInProgress
			}
			return true, nil
		})
		if err != nil || calls != 4 {
			t.Fatalf("Poll = %v after %d calls, want nil after 4", err, calls)
		}

		calls = 0
		start := time.Now()
		err = kafkaoffset.Poll(ctx, func() (bool, error) {
			calls++
			if calls == 2 {
				return false, fmt.Errorf("fetching offsets: %w", sarama.ErrGroupAuthorizationFailed)
			}
			return false, nil
		})
		if !errors.Is(err, sarama.ErrGroupAuthorizationFailed) || calls != 2 || time.Since(start) > time.Millisecond {
			t.Fatalf("Poll = %v after %d calls and %v, want the refusal after 2 calls and 1ms", err, calls, time.Since(start))
		}

		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err = kafkaoffset.Poll(short, func() (bool, error) { return false, sarama.ErrNotCoordinatorForConsumer })
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, sarama.ErrNotCoordinatorForConsumer) {
			t.Fatalf("Poll at the deadline = %v, want the deadline and the last error", err)
		}
	})
}
