package claim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/boulevard-go/boulevard/validate"
)

// Values of the options both Kafka sources share; each source documents
// them.
const (
	OffsetEarliest  = "earliest"
	OffsetLatest    = "latest"
	OffsetTimestamp = "timestamp"

	BeginCommitted = "committed"
	BeginReset     = "reset"

	CommitInterval = "interval"
	CommitOnAck    = "ack"

	RebalanceRange             = "range"
	RebalanceRoundRobin        = "roundrobin"
	RebalanceSticky            = "sticky"
	RebalanceCooperativeSticky = "cooperative-sticky"
)

// Default values of the shared options.
const (
	DefaultInitialOffset     = OffsetLatest
	DefaultBeginOffset       = BeginCommitted
	DefaultCommitMode        = CommitInterval
	DefaultCommitInterval    = time.Second
	DefaultFailurePolicy     = FailureCommit
	DefaultRedeliveryBackoff = time.Second
	DefaultRevokeTimeout     = 10 * time.Second
	DefaultConnectTimeout    = 5 * time.Second
	// DefaultHighWaterInterval is how often a member lists the end offsets
	// of the partitions it claims (see Member.HighWaterLoop).
	DefaultHighWaterInterval = 5 * time.Second
	// DefaultWindow is the permit window per partition when the pipeline's
	// producer.Options.Flow.Initial is 0.
	DefaultWindow = 512
)

// Fields points at the options both Kafka sources have, in one source's
// Options value, so that their defaults are set in one place.
type Fields struct {
	InitialOffset     *string
	BeginOffset       *string
	CommitMode        *string
	CommitInterval    *time.Duration
	FailurePolicy     *FailurePolicy
	RedeliveryBackoff *time.Duration
	RevokeTimeout     *time.Duration
	ConnectTimeout    *time.Duration
	HighWaterInterval *time.Duration
}

// SetDefaults replaces every zero field f points at by its default.
func (f Fields) SetDefaults() {
	*f.InitialOffset = cmp.Or(*f.InitialOffset, DefaultInitialOffset)
	*f.BeginOffset = cmp.Or(*f.BeginOffset, DefaultBeginOffset)
	*f.CommitMode = cmp.Or(*f.CommitMode, DefaultCommitMode)
	*f.CommitInterval = cmp.Or(*f.CommitInterval, DefaultCommitInterval)
	*f.FailurePolicy = cmp.Or(*f.FailurePolicy, DefaultFailurePolicy)
	*f.RedeliveryBackoff = cmp.Or(*f.RedeliveryBackoff, DefaultRedeliveryBackoff)
	*f.RevokeTimeout = cmp.Or(*f.RevokeTimeout, DefaultRevokeTimeout)
	*f.ConnectTimeout = cmp.Or(*f.ConnectTimeout, DefaultConnectTimeout)
	*f.HighWaterInterval = cmp.Or(*f.HighWaterInterval, DefaultHighWaterInterval)
}

// Rules reports the broken rules the options of both sources share: the
// struct tags of opts (a pointer to a source's Options) and the start
// time against the initial offset (StartTimeRule), each field named under
// prefix.
func Rules(prefix string, opts any, initial string, start time.Time) []error {
	return []error{validate.Struct(prefix, opts), StartTimeRule(prefix, initial, start)}
}

// RevokeRule checks the revoke timeout against the rebalance timeout the
// client is configured with (named by limitName in the message): a revoked
// partition must let go before the group gives up on the member. It
// returns nil or a *validate.FieldError for prefix+".revokeTimeout".
func RevokeRule(prefix string, revoke, limit time.Duration, limitName string) error {
	if revoke < limit {
		return nil
	}
	return validate.Field(prefix+".revokeTimeout", "ltfield", fmt.Sprintf("must be < %s (%s)", limitName, limit))
}

// StartTimeRule checks the start time against the initial offset: required
// with OffsetTimestamp, and only allowed with it; and not before the Unix
// epoch, as Kafka's timestamps count milliseconds from it (a ListOffsets
// request reads -1 as the end of the partition, -2 as its start). It
// returns nil or a *validate.FieldError for prefix+".startTime".
func StartTimeRule(prefix, initial string, start time.Time) error {
	switch {
	case initial == OffsetTimestamp && start.IsZero():
		return validate.Field(prefix+".startTime", "required_if",
			fmt.Sprintf("is required when initialOffset is %q", OffsetTimestamp))
	case initial == OffsetTimestamp && start.Before(time.UnixMilli(0)):
		return validate.Field(prefix+".startTime", "min",
			"must not be before 1970-01-01T00:00:00Z (Kafka timestamps count milliseconds from it)")
	case initial != OffsetTimestamp && !start.IsZero():
		return validate.Field(prefix+".startTime", "excluded_unless",
			fmt.Sprintf("is only allowed when initialOffset is %q", OffsetTimestamp))
	}
	return nil
}

// QuoteAll quotes and escapes each string, comma-separated.
func QuoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// Flat returns err, or, when its message spans several lines (clients join
// errors with newlines), an error with the lines joined by "; " that
// unwraps to err.
func Flat(err error) error {
	if err == nil || !strings.ContainsAny(err.Error(), "\r\n") {
		return err
	}
	return flatError{err}
}

type flatError struct{ err error }

func (e flatError) Error() string { return oneLine(e.err.Error()) }
func (e flatError) Unwrap() error { return e.err }

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' }), "; ")
}

// ErrList is several errors reported on one line, separated by "; ".
type ErrList []error

// Error joins the errors' messages, each on one line, with "; ".
func (l ErrList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = oneLine(e.Error())
	}
	return strings.Join(s, "; ")
}

// Unwrap returns the errors, for errors.Is and errors.As.
func (l ErrList) Unwrap() []error { return l }

// The errors both Kafka sources return, so that a caller checks them the
// same way whichever client runs (each source documents them).
var (
	ErrClosed       = errors.New("kafka: source closed")
	ErrConnect      = errors.New("kafka: cannot connect")
	ErrUnknownTopic = errors.New("kafka: unknown topic")
	ErrConsume      = errors.New("kafka: consumer group keeps failing")
	ErrDenied       = errors.New("kafka: access denied")
	ErrNotCreated   = errors.New("kafka: source not made with New")
	ErrNilContext   = errors.New("kafka: nil context")
)

// Probes is a source's connection check: every bootstrap broker asked at
// once, the first answer enough. Close waits for the probes still running
// (Wait). The zero value is ready to use.
type Probes struct {
	wg   sync.WaitGroup
	once sync.Once
	ctx  context.Context // the probes' context, ended by cut
	cut  context.CancelFunc
}

// init makes the probes' context.
func (ps *Probes) init() {
	ps.once.Do(func() { ps.ctx, ps.cut = context.WithCancel(context.Background()) })
}

// ProbeBackoff is the first wait between two rounds of Probes.Check, which
// doubles up to MaxProbeBackoff.
const (
	ProbeBackoff    = 250 * time.Millisecond
	MaxProbeBackoff = 2 * time.Second
)

// ProbeRetryLog is the WARN line of a connection check whose first round
// failed and that tries again until its timeout.
const ProbeRetryLog = "kafka: no broker answered; trying again until the connect timeout"

// Check runs probe for every broker at once, each in its own goroutine,
// unless closed reports that the source is closed (checked and registered
// under mu, so that once Close has marked the source closed no probe
// starts: Check then returns ErrClosed). It returns nil as soon as one
// probe succeeds, or when ctx ends. When every probe of a round fails
// before timeout has passed since the check began (a broker refusing
// connections fails at once), it logs the round's errors at WARN on log
// (once a check, ProbeRetryLog) and runs another round after a backoff
// (ProbeBackoff, doubling up to MaxProbeBackoff), until a round succeeds
// or timeout has passed: a cluster that cannot be reached then fails the
// check after timeout whether its brokers refuse connections or never
// answer, as the pipeline's restart rules expect of a run that cannot
// connect. An error final reports as final (a broker that refused the
// credentials) ends the check at once. Otherwise the check returns an
// error wrapping ErrConnect that names every broker (quoted) with its
// cause in the last round, on one line. Probes still running when it
// returns (a broker that has not answered when another did, or when ctx
// ended) have their ctx ended, and return at once; Wait waits for them.
// probe's ctx also ends when Wait gives up waiting.
func (ps *Probes) Check(ctx context.Context, mu *sync.Mutex, closed *bool, brokers []string, timeout time.Duration,
	log *slog.Logger, final func(error) bool, probe func(ctx context.Context, addr string) error) error {
	deadline := time.Now().Add(timeout)
	backoff := ProbeBackoff
	for round := 0; ; round++ {
		done, err := ps.round(ctx, mu, closed, brokers, timeout, probe)
		if done || err == nil {
			return err
		}
		wait := min(backoff, time.Until(deadline))
		if wait <= 0 || final(err) {
			return err
		}
		if round == 0 {
			log.WarnContext(ctx, ProbeRetryLog, slog.Duration("connect_timeout", timeout), slog.Any("error", err))
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
		backoff = min(2*backoff, MaxProbeBackoff)
	}
}

// round is one round of Check: done when Check must return err as it is
// (the source is closed: ErrClosed; ctx ended or a probe succeeded: nil),
// else the round's error, which names every broker.
func (ps *Probes) round(ctx context.Context, mu *sync.Mutex, closed *bool, brokers []string, timeout time.Duration,
	probe func(ctx context.Context, addr string) error) (done bool, err error) {
	type result struct {
		addr string
		err  error
	}
	results := make(chan result, len(brokers))
	mu.Lock()
	if *closed {
		mu.Unlock()
		return true, ErrClosed
	}
	ps.wg.Add(len(brokers))
	mu.Unlock()
	ps.init()
	// The round's probes end once it has its answer: a probe still
	// waiting on a broker then would only hold a connection, and a stage
	// that stops would wait for it.
	pctx, cut := context.WithCancel(ps.ctx)
	defer cut()
	for _, addr := range brokers {
		go func() {
			defer ps.wg.Done()
			results <- result{addr, probe(pctx, addr)}
		}()
	}
	errs := make([]error, 0, len(brokers))
	for range brokers {
		select {
		case r := <-results:
			if r.err == nil {
				return true, nil
			}
			errs = append(errs, fmt.Errorf("%q: %w", r.addr, Flat(r.err)))
		case <-ctx.Done():
			return true, nil
		}
	}
	return false, fmt.Errorf("%w: no broker answered within %s: %w", ErrConnect, timeout, ErrList(errs))
}

// Wait waits for the probes still running. When ctx ends first, it ends
// their context, which ends them at once, and waits for them to return.
func (ps *Probes) Wait(ctx context.Context) {
	ps.init()
	done := make(chan struct{})
	go func() { ps.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		ps.cut()
		<-done
	}
}
