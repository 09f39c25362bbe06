package kafkaoffset_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// Guarantee: Poll waits 1ms after the first call, doubling each time up to
// 100ms, so that a coordinator that moves is asked again at once and one
// that takes long is asked ten times a second, not less.
func TestPollWaitsFromOneMillisecondDoublingUpTo100ms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var at []time.Duration
		err := kafkaoffset.Poll(context.Background(), func() (bool, error) {
			at = append(at, time.Since(start))
			return len(at) == 10, sarama.ErrOffsetsLoadInProgress
		})
		want := []time.Duration{0, 1, 3, 7, 15, 31, 63, 127, 227, 327}
		for i := range want {
			want[i] *= time.Millisecond
		}
		if err != nil || !slices.Equal(at, want) {
			t.Fatalf("Poll = %v, calls at %v; want nil, calls at %v", err, at, want)
		}
	})
}

// Guarantee: when Poll's context ends, it reports the last error try
// returned even when the calls after it returned none (not done yet,
// without an error), so a timeout still says what failed.
func TestPollAtTheDeadlineReportsTheLastErrorAfterCallsWithoutOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		calls := 0
		err := kafkaoffset.Poll(ctx, func() (bool, error) {
			if calls++; calls == 1 {
				return false, sarama.ErrNotCoordinatorForConsumer
			}
			return false, nil
		})
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, sarama.ErrNotCoordinatorForConsumer) || calls < 3 {
			t.Fatalf("Poll at the deadline = %v after %d calls, want the deadline and the error of the first call, after several", err, calls)
		}
	})
}
