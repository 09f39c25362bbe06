package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

// checkBrokers dials every bootstrap broker at once and asks each for its
// API versions (after TLS and SASL, when enabled), each attempt bounded by
// Options.ConnectTimeout; when they all fail at once (refused
// connections), it logs one WARN line on log and tries again until
// ConnectTimeout has passed (see claim.Probes.Check). It returns nil as
// soon as one broker answers, or when ctx ends; otherwise an error wrapping ErrConnect that names every
// broker with its cause (ErrClosed once the source is closed), and also
// ErrDenied when a broker refused the credentials. Attempts still
// running when it returns are ended, closing their connections (Close
// waits for them).
func (s *Source) checkBrokers(ctx context.Context, log *slog.Logger, cfg *sarama.Config) error {
	pc := kafkaconn.ProbeConfig(cfg, s.opts.ConnectTimeout)
	err := s.live.CheckBrokers(ctx, s.opts.Brokers, s.opts.ConnectTimeout, log, denied,
		func(ctx context.Context, addr string) error { return kafkaconn.ProbeBroker(ctx, addr, pc) })
	if denied(err) {
		// A broker answered, refusing the credentials: retrying changes
		// nothing until an operator does.
		return fmt.Errorf("%w: %w", ErrDenied, err)
	}
	return err
}

// checkTopics reports the topics the cluster does not have, as an error
// wrapping ErrUnknownTopic (and sarama's error), a topic the cluster
// refuses for authorization as an error wrapping ErrDenied, or the first
// other error met while asking (ErrConnect).
func checkTopics(client sarama.Client, topics []string) error {
	var missing []string
	var cause error
	for _, t := range topics {
		_, err := client.Partitions(t)
		switch {
		case err == nil:
		case errors.Is(err, sarama.ErrUnknownTopicOrPartition):
			missing = append(missing, t)
			cause = err
		case denied(err):
			// Asking again changes nothing until an operator does.
			return fmt.Errorf("%w: topic %q: %w", ErrDenied, t, flat(err))
		default:
			return fmt.Errorf("%w: topic %q: %w", ErrConnect, t, flat(err))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w %s (subscribed topics must exist): %w", ErrUnknownTopic, quoteAll(missing), flat(cause))
}

// quoteAll quotes and escapes each string, comma-separated.
func quoteAll(ss []string) string { return claim.QuoteAll(ss) }

// flat returns err, or, when its message spans several lines (sarama joins
// errors with newlines), an error with the lines joined by "; " that
// unwraps to err.
func flat(err error) error { return claim.Flat(err) }

// errList is several errors reported on one line, separated by "; ".
type errList = claim.ErrList
