package claim

import (
	"errors"
	"fmt"
	"strings"
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
)

// StartTimeRule checks the start time against the initial offset: required
// with OffsetTimestamp, and only allowed with it. It returns nil or a
// *validate.FieldError for prefix+".startTime".
func StartTimeRule(prefix, initial string, start time.Time) error {
	switch {
	case initial == OffsetTimestamp && start.IsZero():
		return validate.Field(prefix+".startTime", "required_if",
			fmt.Sprintf("is required when initialOffset is %q", OffsetTimestamp))
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

func (l ErrList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = oneLine(e.Error())
	}
	return strings.Join(s, "; ")
}

func (l ErrList) Unwrap() []error { return l }

// The errors both Kafka sources return, so that a caller checks them the
// same way whichever client runs (each source documents them).
var (
	ErrClosed       = errors.New("kafka: source closed")
	ErrConnect      = errors.New("kafka: cannot connect")
	ErrUnknownTopic = errors.New("kafka: unknown topic")
	ErrConsume      = errors.New("kafka: consumer group keeps failing")
)
