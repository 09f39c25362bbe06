package kafkatopology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// ErrRetentionTooShort is wrapped by the error of a Declare over an
// existing hold topic or DLQ whose configuration lets the broker delete
// letters before they are released or replayed (see RetentionError).
var ErrRetentionTooShort = errors.New("kafkatopology: topic retention too short for its letters")

// RetentionError is the error of a Declare over an existing topic that
// can delete letters before their time: a hold topic whose retention.ms is
// below its delay plus MinHoldRetentionMargin, a hold topic or DLQ whose
// cleanup.policy compacts (compaction keeps only the last record of each
// key), or, unless Options.AcceptRetentionBytes, a hold topic or DLQ with
// a finite retention.bytes (size retention deletes the oldest records of
// a partition once it holds more, however young they are). It wraps
// ErrRetentionTooShort. Declare changes nothing of the topic: raise its
// retention.ms (or set -1, unlimited), set its cleanup.policy to delete,
// or set its retention.bytes to -1, and declare again.
type RetentionError struct {
	// Topic is the Kafka topic.
	Topic string
	// Setting is the configuration refused: "retention.ms",
	// "cleanup.policy" or "retention.bytes".
	Setting string
	// Retention is the topic's retention.ms; negative when unlimited.
	Retention time.Duration
	// CleanupPolicy is the topic's cleanup.policy.
	CleanupPolicy string
	// RetentionBytes is the topic's retention.bytes, the most a partition
	// keeps; negative when unlimited.
	RetentionBytes int64
	// Delay is the hold's delay; zero for a DLQ.
	Delay time.Duration
}

// Error names the topic, the setting refused and its value, and the
// hold's delay.
func (e *RetentionError) Error() string {
	kind, fate := "hold topic", "released"
	if e.Delay == 0 {
		kind, fate = "DLQ", "replayed"
	}
	setting := e.Setting
	if setting == "" && compacts(e.CleanupPolicy) {
		setting = cfgCleanup
	}
	switch setting {
	case cfgRetentionBytes:
		return fmt.Sprintf("kafkatopology: %s %q has retention.bytes %d: the broker deletes the oldest records of a partition holding more, however young, so letters can be lost before they are %s; set its retention.bytes to -1, or accept it with Options.AcceptRetentionBytes",
			kind, e.Topic, e.RetentionBytes, fate)
	case cfgCleanup:
		return fmt.Sprintf("kafkatopology: %s %q has cleanup.policy %q: compaction deletes the older records of a key (and refuses records without a key), so letters can be lost before they are %s; set its cleanup.policy to delete",
			kind, e.Topic, e.CleanupPolicy, fate)
	}
	need := e.Delay + MinHoldRetentionMargin
	return fmt.Sprintf("kafkatopology: %s %q keeps records %s (retention.ms %d), less than its hold of %s plus %s: letters can be deleted before they are %s; set its retention.ms to at least %d, or -1",
		kind, e.Topic, e.Retention, e.Retention.Milliseconds(), e.Delay, MinHoldRetentionMargin, fate, need.Milliseconds())
}

// Unwrap returns ErrRetentionTooShort.
func (e *RetentionError) Unwrap() error { return ErrRetentionTooShort }

// The log messages of the retention checks.
const (
	msgUnchecked    = "kafkatopology: the retention of existing topics could not be checked; declaring them as they are: a hold topic that keeps records less than its delay loses letters before they are due"
	msgDLQRetention = "kafkatopology: an existing DLQ deletes dead letters older than its retention.ms, replayed or not"
)

// The topic configurations the backend sets and checks.
const (
	cfgRetention      = "retention.ms"
	cfgCleanup        = "cleanup.policy"
	cfgRetentionBytes = "retention.bytes"
)

// kept is an existing hold topic (delay > 0) or DLQ (delay 0) whose
// configuration Declare checks.
type kept struct {
	topic string
	delay time.Duration
}

// holdConfig is the configuration of a hold topic the backend creates:
// its letters are kept their delay plus Options.HoldRetentionMargin, and
// deleted by time only.
func (b *Backend[T]) holdConfig(delay time.Duration) map[string]*string {
	return retentionConfig(delay + b.opts.HoldRetentionMargin)
}

// dlqConfig is the configuration of a DLQ the backend creates: its dead
// letters are kept Options.DLQRetention, forever when zero, and deleted
// by time only.
func (b *Backend[T]) dlqConfig() map[string]*string {
	if b.opts.DLQRetention == 0 {
		return retentionConfig(-1)
	}
	return retentionConfig(b.opts.DLQRetention)
}

// retentionConfig keeps records r (forever when negative), deleting them
// by time, never by compaction nor by size (whatever the broker's
// log.retention.bytes).
func retentionConfig(r time.Duration) map[string]*string {
	ms := "-1"
	if r >= 0 {
		ms = strconv.FormatInt(r.Milliseconds(), 10)
	}
	policy, bytes := "delete", "-1"
	return map[string]*string{cfgRetention: &ms, cfgCleanup: &policy, cfgRetentionBytes: &bytes}
}

// compacts reports whether cleanup.policy policy compacts ("compact",
// alone or with "delete").
func compacts(policy string) bool {
	for p := range strings.SplitSeq(policy, ",") {
		if strings.TrimSpace(p) == "compact" {
			return true
		}
	}
	return false
}

// checkConfigs describes the configuration of the topology's topics
// (every topic of all, the existing hold topics and DLQ ts among them) in
// one request: it logs a WARN for each topic whose max.message.bytes is
// below what the producer sends (see checkLimits), and returns the
// retention check of ts (see checkRetention). When the cluster does not
// describe them (the client may not be authorized to) it logs one WARN
// naming the topics of ts, whose retention it could not check, if any:
// a declaration does not fail only because it cannot check.
func (b *Backend[T]) checkConfigs(ctx context.Context, admin sarama.ClusterAdmin, all []string, ts []kept) error {
	retained := make(map[string]bool, len(ts))
	for _, t := range ts {
		retained[t.topic] = true
	}
	rs := make([]*sarama.ConfigResource, len(all))
	for i, name := range all {
		cfgs := []string{cfgMaxMessageBytes}
		if retained[name] {
			cfgs = append(cfgs, cfgRetention, cfgCleanup, cfgRetentionBytes)
		}
		rs[i] = &sarama.ConfigResource{Type: sarama.TopicResource, Name: name, ConfigNames: cfgs}
	}
	results, err := admin.DescribeConfigs(rs, sarama.DescribeConfigsOptions{})
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%w: describing the configuration of topics %q: %w", ErrAdmin, all, cerr)
		}
		if len(ts) > 0 {
			b.warnUnchecked(names(ts), err)
		}
		return nil
	}
	byName := make(map[string]*sarama.ConfigResourceResult, len(results))
	for _, r := range results {
		if r != nil && r.Type == sarama.TopicResource {
			byName[r.Name] = r
		}
	}
	b.checkLimits(all, byName)
	return b.checkRetention(ts, byName)
}

// msgLimitBelowProducer is the WARN of a topic whose max.message.bytes is
// below what the producer sends.
const msgLimitBelowProducer = "kafkatopology: a topic's max.message.bytes is below the producer's Producer.MaxMessageBytes; the broker refuses a record between the two: a letter of that size fails its publish or hand-off to the topic"

// checkLimits logs a WARN for each topic of all whose max.message.bytes,
// as described in byName, is below Producer.MaxMessageBytes: the producer
// sends records the broker refuses. (Kafka's default, 1048588, is 12 bytes
// over sarama's, 1 MiB, less than a record batch's header: a record within
// that header's size of Producer.MaxMessageBytes is refused even so, but
// Publish's reserve keeps letters far below it.) A topic not described is
// left out (a refusal reads its limit then: see withTopicLimit).
func (b *Backend[T]) checkLimits(all []string, byName map[string]*sarama.ConfigResourceResult) {
	producer := b.cfg.Producer.MaxMessageBytes
	for _, name := range all {
		limit, ok := describedLimit(byName[name])
		if !ok || limit >= producer {
			continue
		}
		b.log.Warn(msgLimitBelowProducer, slog.String("topic", name), slog.Int("maxMessageBytes", limit),
			slog.Int("producerMaxMessageBytes", producer))
	}
}

// describedLimit returns the max.message.bytes the cluster answered in r,
// false when r holds none.
func describedLimit(r *sarama.ConfigResourceResult) (int, bool) {
	if r == nil || r.ErrorCode != sarama.ErrNoError {
		return 0, false
	}
	for _, e := range r.Configs {
		if e.Name != cfgMaxMessageBytes {
			continue
		}
		if n, err := strconv.Atoi(e.Value); err == nil && n > 0 {
			return n, true
		}
	}
	return 0, false
}

// checkRetention returns a *RetentionError for the first of the existing
// topics ts, as described in byName, that can delete letters before their
// time (see RetentionError; a finite retention.bytes counts unless
// Options.AcceptRetentionBytes). It logs a WARN for a DLQ that keeps dead
// letters for less than Options.DLQRetention (forever by default), and
// one WARN naming the topics it could not check when the cluster did not
// describe them.
func (b *Backend[T]) checkRetention(ts []kept, byName map[string]*sarama.ConfigResourceResult) error {
	var (
		refused   error
		unchecked []string
		errs      []error
	)
	for _, t := range ts {
		tc, err := topicRetention(byName[t.topic])
		if err != nil {
			unchecked = append(unchecked, t.topic)
			errs = append(errs, fmt.Errorf("topic %q: %w", t.topic, err))
			continue
		}
		retention := tc.retention
		var setting string
		switch {
		case compacts(tc.policy):
			setting = cfgCleanup
		case retention >= 0 && t.delay > 0 && retention < t.delay+MinHoldRetentionMargin:
			setting = cfgRetention
		case tc.bytes >= 0 && !b.opts.AcceptRetentionBytes:
			setting = cfgRetentionBytes
		}
		if setting != "" {
			if refused == nil {
				refused = &RetentionError{Topic: t.topic, Setting: setting, Retention: retention,
					CleanupPolicy: tc.policy, RetentionBytes: tc.bytes, Delay: t.delay}
			}
			continue
		}
		if want := b.opts.DLQRetention; t.delay == 0 && retention >= 0 && (want == 0 || retention < want) {
			wanted := "forever"
			if want > 0 {
				wanted = want.String()
			}
			b.log.Warn(msgDLQRetention,
				slog.String("topic", t.topic), slog.Duration("retention", retention), slog.String("dlqRetention", wanted))
		}
	}
	if len(unchecked) > 0 {
		b.warnUnchecked(unchecked, errors.Join(errs...))
	}
	return refused
}

// warnUnchecked logs that the retention of topics could not be checked.
func (b *Backend[T]) warnUnchecked(topics []string, err error) {
	b.log.Warn(msgUnchecked,
		slog.Any("topics", topics), slog.Any("error", err))
}

// checkedConfig is what Declare checks of an existing topic's
// configuration.
type checkedConfig struct {
	retention time.Duration // retention.ms; negative: unlimited
	policy    string        // cleanup.policy
	bytes     int64         // retention.bytes; negative: unlimited
}

// topicRetention returns the configuration the cluster answered in r. A
// retention.bytes missing from the answer counts as unlimited, Kafka's
// default (a cluster too old to describe it does not have it).
func topicRetention(r *sarama.ConfigResourceResult) (checkedConfig, error) {
	tc := checkedConfig{bytes: -1}
	if r == nil {
		return tc, errors.New("not in the answer")
	}
	if r.ErrorCode != sarama.ErrNoError {
		return tc, &sarama.DescribeConfigError{Err: r.ErrorCode, ErrMsg: r.ErrorMsg}
	}
	seen := false
	for _, e := range r.Configs {
		switch e.Name {
		case cfgRetention:
			ms, err := strconv.ParseInt(e.Value, 10, 64)
			if err != nil {
				return tc, fmt.Errorf("%s is %q, not a number", cfgRetention, e.Value)
			}
			switch {
			case ms < 0:
				tc.retention = -1
			case ms > math.MaxInt64/int64(time.Millisecond):
				tc.retention = math.MaxInt64
			default:
				tc.retention = time.Duration(ms) * time.Millisecond
			}
			seen = true
		case cfgCleanup:
			tc.policy = e.Value
		case cfgRetentionBytes:
			n, err := strconv.ParseInt(e.Value, 10, 64)
			if err != nil {
				return tc, fmt.Errorf("%s is %q, not a number", cfgRetentionBytes, e.Value)
			}
			tc.bytes = max(n, -1)
		}
	}
	if !seen {
		return tc, fmt.Errorf("%s is not in the answer", cfgRetention)
	}
	return tc, nil
}

// names returns the topics of ts.
func names(ts []kept) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.topic
	}
	return out
}
