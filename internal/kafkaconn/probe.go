package kafkaconn

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// Probe dials every bootstrap broker at once and asks each for its API
// versions (after TLS and SASL, when cfg enables them), each step bounded
// by timeout and by what is left until ctx's deadline. It returns nil if
// one answered, or an error wrapping kind that names every broker with its
// cause, which also wraps ctx.Err() when ctx ended meanwhile. clean, when
// not nil, rewrites each broker's error before it is named (to leave
// credentials out). sarama's own client start-up would wait for its read
// timeout (30s by default) on a broker that accepts connections and never
// answers, several times over.
//
// Probe returns once every broker's attempt has ended, within a few
// timeouts: a ctx cancelled without a deadline is seen then.
func Probe(ctx context.Context, kind error, brokers []string, cfg *sarama.Config, timeout time.Duration, clean func(error) error) error {
	d := timeout
	if dl, ok := ctx.Deadline(); ok {
		d = max(min(d, time.Until(dl)), time.Millisecond)
	}
	pc := ProbeConfig(cfg, d)
	errs := make(chan error, len(brokers))
	for _, addr := range brokers {
		go func() {
			err := ProbeBroker(context.Background(), addr, pc)
			if err != nil {
				if clean != nil {
					err = clean(err)
				}
				err = fmt.Errorf("%q: %w", addr, err)
			}
			errs <- err
		}()
	}
	var failed []string
	var last error
	ok := false
	for range brokers { // every attempt ends within a few timeouts
		if err := <-errs; err == nil {
			ok = true
		} else {
			failed = append(failed, err.Error())
			last = err
		}
	}
	if ok {
		return nil
	}
	if err := ended(ctx); err != nil {
		return fmt.Errorf("%w: no broker answered within %s: %s: %w", kind, d.Round(time.Millisecond), strings.Join(failed, "; "), err)
	}
	// Every broker failed by itself (a refusal, a closed connection, or its
	// own timeout, which its error names): the error does not claim a
	// wait. errorsCause writes nothing: the broker list already ends with
	// its cause.
	return fmt.Errorf("%w: no broker answered: %s%w", kind, strings.Join(failed, "; "), errorsCause{last})
}

// ProbeConfig returns a copy of cfg for probing brokers within d: its
// dial, read and write timeouts at most d, and sarama's own ApiVersions
// exchange off, since it does not fail on a timeout (it retries with
// another version and goes on): ProbeBroker asks explicitly.
func ProbeConfig(cfg *sarama.Config, d time.Duration) *sarama.Config {
	pc := *cfg
	pc.Net.DialTimeout = min(pc.Net.DialTimeout, d)
	pc.Net.ReadTimeout = min(pc.Net.ReadTimeout, d)
	pc.Net.WriteTimeout = min(pc.Net.WriteTimeout, d)
	pc.ApiVersionsRequest = false
	return &pc
}

// ProbeBroker connects to addr as cfg says (a ProbeConfig) and exchanges
// one request, ApiVersions, and closes the connection. When ctx ends
// first, the connection is cut: the attempt fails at once (ErrCut).
func ProbeBroker(ctx context.Context, addr string, cfg *sarama.Config) error {
	conns := New(cfg)
	own := *cfg
	conns.Use(&own)
	stop := conns.CutWhenDone(ctx)
	defer stop()
	br := sarama.NewBroker(addr)
	if err := br.Open(&own); err != nil {
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
