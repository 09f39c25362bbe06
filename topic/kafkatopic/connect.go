package kafkatopic

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// probe dials every bootstrap broker at once and asks each for its API
// versions (after TLS and SASL, when configured), each step bounded by
// Options.ConnectTimeout and by what is left until ctx's deadline. It
// returns nil if one answered, or an error naming every broker with its
// cause, which wraps ctx.Err() when ctx ended meanwhile. sarama's own
// client start-up would wait for its read timeout (30s by default) on a
// broker that accepts connections and never answers, several times over.
func (b *Backend[T]) probe(ctx context.Context) error {
	pc := *b.cfg
	d := b.opts.ConnectTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = max(min(d, time.Until(dl)), time.Millisecond)
	}
	pc.Net.DialTimeout = min(pc.Net.DialTimeout, d)
	pc.Net.ReadTimeout = min(pc.Net.ReadTimeout, d)
	pc.Net.WriteTimeout = min(pc.Net.WriteTimeout, d)
	pc.ApiVersionsRequest = false // asked explicitly below
	errs := make(chan error, len(b.opts.Brokers))
	for _, addr := range b.opts.Brokers {
		go func() {
			err := probeBroker(addr, &pc)
			if err != nil {
				err = fmt.Errorf("%q: %w", addr, b.red.err(err))
			}
			errs <- err
		}()
	}
	var failed []string
	var first error
	ok := false
	for range b.opts.Brokers { // every probe ends within a few ConnectTimeouts
		if err := <-errs; err == nil {
			ok = true
		} else {
			failed = append(failed, err.Error())
			first = err
		}
	}
	if ok {
		return nil
	}
	if err := ended(ctx); err != nil {
		return fmt.Errorf("%w: no broker answered within %s: %s: %w", ErrConnect, d.Round(time.Millisecond), strings.Join(failed, "; "), err)
	}
	// Every broker failed by itself (a refusal, a closed connection, or its
	// own timeout, which its error names): the error does not claim a
	// wait. errorsCause writes nothing: the broker list already ends with
	// its cause.
	return fmt.Errorf("%w: no broker answered: %s%w", ErrConnect, strings.Join(failed, "; "), errorsCause{first})
}

// ended returns ctx.Err(), or context.DeadlineExceeded once ctx's deadline
// has passed even if its timer has not fired yet: a step bounded by what
// was left of the deadline may time out first.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// errorsCause unwraps to the cause of the last failure without repeating
// its text.
type errorsCause struct{ err error }

func (e errorsCause) Error() string { return "" }
func (e errorsCause) Unwrap() error { return e.err }

func probeBroker(addr string, cfg *sarama.Config) error {
	br := sarama.NewBroker(addr)
	if err := br.Open(cfg); err != nil {
		return err
	}
	defer func() { _ = br.Close() }()
	if ok, err := br.Connected(); err != nil || !ok {
		if err == nil {
			err = sarama.ErrNotConnected
		}
		return err
	}
	_, err := br.ApiVersions(&sarama.ApiVersionsRequest{})
	return err
}
