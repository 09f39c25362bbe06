package franz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

// checkBrokers dials every bootstrap broker at once, with the client
// options (TLS, SASL), and asks each for its API versions, each attempt
// bounded by Options.ConnectTimeout; when they all fail at once (refused
// connections), it logs one WARN line on log and tries again until
// ConnectTimeout has passed (see claim.Probes.Check). It returns nil as
// soon as one broker answers, or when ctx ends; otherwise an error wrapping ErrConnect that
// names every broker with its cause (ErrClosed once the source is closed),
// and also ErrDenied when a broker refused the credentials. Attempts
// still running when it returns are ended, closing their clients (Close
// waits for them).
func (s *Source) checkBrokers(ctx context.Context, log *slog.Logger) error {
	err := s.live.CheckBrokers(ctx, s.opts.Brokers, s.opts.ConnectTimeout, log, denied, s.probeBroker)
	if denied(err) {
		// A broker answered, refusing the credentials: retrying changes
		// nothing until an operator does.
		return fmt.Errorf("%w: %w", ErrDenied, err)
	}
	return err
}

// probeBroker connects to addr and exchanges one request, given up when
// ctx ends.
func (s *Source) probeBroker(ctx context.Context, addr string) error {
	opts := append(append([]kgo.Opt(nil), s.opts.ClientOptions...),
		kgo.SeedBrokers(addr), kgo.DialTimeout(s.opts.ConnectTimeout), kgo.RequestRetries(0))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	_, err = cl.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %s: %w", s.opts.ConnectTimeout, err)
	}
	return err
}

// checkTopics reports the topics the cluster does not have, as an error
// wrapping ErrUnknownTopic (and the broker's error), a topic the cluster
// refuses for authorization as an error wrapping ErrDenied, or the first
// other error met while asking (ErrConnect).
func checkTopics(ctx context.Context, cl *kgo.Client, topics []string) error {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("%w: metadata: %w", ErrConnect, claim.Flat(err))
	}
	var missing []string
	var cause error
	for _, t := range resp.Topics {
		err := kerr.ErrorForCode(t.ErrorCode)
		switch {
		case err == nil:
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			missing = append(missing, *t.Topic)
			cause = err
		case denied(err):
			// Asking again changes nothing until an operator does.
			return fmt.Errorf("%w: topic %q: %w", ErrDenied, *t.Topic, err)
		default:
			return fmt.Errorf("%w: topic %q: %w", ErrConnect, *t.Topic, err)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w %s (subscribed topics must exist): %w", ErrUnknownTopic, claim.QuoteAll(missing), cause)
}
