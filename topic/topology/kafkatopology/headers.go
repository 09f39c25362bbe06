package kafkatopology

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/quote"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/internal/lettersize"
)

// Record headers: what a letter knows about its history. Times are RFC
// 3339 with nanoseconds, in UTC, of the years 0 to 9999; counts are
// decimal, from 0 to topology.MaxRoutingShards-1 for the shard and to
// topology.MaxRetriesLimit for retries. A record with a history header
// outside that does not decode.
const (
	// HeaderShard is the letter's routing shard (absent: 0).
	HeaderShard = "topology-shard"
	// HeaderRetries is how many times it was retried (absent: 0).
	HeaderRetries = "topology-retries"
	// HeaderFirstFailure is when it first failed.
	HeaderFirstFailure = "topology-first-failure"
	// HeaderLastFailure is when it last failed.
	HeaderLastFailure = "topology-last-failure"
	// HeaderResume is "1" on a letter of a sequenced topology that still
	// holds its key (Letter.Resume); "0" or its absence is false.
	HeaderResume = "topology-resume"
	// HeaderGroup names the only consumer group a record of the main topic
	// is for (a released retry, a requeued or replayed letter); readers of
	// other groups skip it. On a hold record it is the group to release to.
	HeaderGroup = "topology-group"
	// HeaderDue is when a hold record falls due.
	HeaderDue = "topology-due"
	// HeaderTopic is, on a hold record, the Kafka topic to release it to.
	HeaderTopic = "topology-topic"

	// HeaderDeathReason is a dead letter's Death.Reason.
	HeaderDeathReason = "topology-death-reason"
	// HeaderDeathError is its Death.Error.
	HeaderDeathError = "topology-death-error"
	// HeaderDeathTopic is its Death.Topic (the topology's main topic name).
	HeaderDeathTopic = "topology-death-topic"
	// HeaderDeathGroup is its Death.Group.
	HeaderDeathGroup = "topology-death-group"
	// HeaderDeathRetries is its Death.Retries.
	HeaderDeathRetries = "topology-death-retries"
	// HeaderDeathFirstFailure is its Death.FirstFailure.
	HeaderDeathFirstFailure = "topology-death-first-failure"
	// HeaderDeathLastFailure is its Death.LastFailure.
	HeaderDeathLastFailure = "topology-death-last-failure"
)

func header(k, v string) sarama.RecordHeader {
	return sarama.RecordHeader{Key: []byte(k), Value: []byte(v)}
}

func timeHeader(k string, t time.Time) sarama.RecordHeader {
	return header(k, t.UTC().Format(time.RFC3339Nano))
}

// letterHeaders returns l's history as headers (nothing for a fresh,
// unsequenced letter), then l's own Headers but the names starting with
// topology.ReservedHeaderPrefix, which are the history's.
func letterHeaders[T any](l *topology.Letter[T], hs []sarama.RecordHeader) []sarama.RecordHeader {
	for k, v := range l.Headers {
		if !topology.ReservedHeader(k) {
			hs = append(hs, header(k, v))
		}
	}
	if l.Shard != 0 {
		hs = append(hs, header(HeaderShard, strconv.Itoa(l.Shard)))
	}
	if l.Retries != 0 {
		hs = append(hs, header(HeaderRetries, strconv.Itoa(l.Retries)))
	}
	if !l.FirstFailure.IsZero() {
		hs = append(hs, timeHeader(HeaderFirstFailure, l.FirstFailure))
	}
	if !l.LastFailure.IsZero() {
		hs = append(hs, timeHeader(HeaderLastFailure, l.LastFailure))
	}
	if l.Resume {
		hs = append(hs, header(HeaderResume, "1"))
	}
	if d := l.Death; d != nil {
		hs = append(hs, header(HeaderDeathReason, string(d.Reason)), header(HeaderDeathError, topology.BoundDeathError(d.Error)),
			header(HeaderDeathTopic, d.Topic), header(HeaderDeathGroup, d.Group),
			header(HeaderDeathRetries, strconv.Itoa(d.Retries)))
		if !d.FirstFailure.IsZero() {
			hs = append(hs, timeHeader(HeaderDeathFirstFailure, d.FirstFailure))
		}
		if !d.LastFailure.IsZero() {
			hs = append(hs, timeHeader(HeaderDeathLastFailure, d.LastFailure))
		}
	}
	return hs
}

// recordBatchOverhead is the header of a record batch (Kafka's
// RECORD_BATCH_OVERHEAD): a broker measures what it takes by the batch,
// which a lone record's batch makes this much larger than the record.
const recordBatchOverhead = 61

// reserveKeys are the headers a hold or a dead-lettering writes, for
// lettersize.Reserve.
var reserveKeys = lettersize.Keys{Shard: HeaderShard, Retries: HeaderRetries, FirstFailure: HeaderFirstFailure,
	LastFailure: HeaderLastFailure, Resume: HeaderResume, Group: HeaderGroup,
	DeathReason: HeaderDeathReason, DeathError: HeaderDeathError, DeathTopic: HeaderDeathTopic, DeathGroup: HeaderDeathGroup,
	DeathRetries: HeaderDeathRetries, DeathFirstFailure: HeaderDeathFirstFailure, DeathLastFailure: HeaderDeathLastFailure,
	ResumeValue: "1"}

// historyReserve returns what a record of topology t published to its
// main topic kname can grow by, as the producer counts a record's size,
// once a hold or a dead-lettering adds headers to it: every header of the
// history and of a Death at its largest (lettersize.Reserve), a hold's due
// time and main topic, and the header of the record batch a broker
// measures.
func historyReserve(kname string, t *topology.Topology) int {
	h := func(key string, n int) int { return len(key) + n + 2*binary.MaxVarintLen32 }
	return recordBatchOverhead + lettersize.Reserve(reserveKeys, t, h) +
		h(HeaderDue, lettersize.TimeBytes) + h(HeaderTopic, len(kname))
}

// meta is what a record's headers say besides the letter's own fields.
type meta struct {
	group, topic string
	due          time.Time
	shard        int // the letter's, for a releaser
}

// Why a history header does not decode: no letter writes such a value.
var (
	errCount  = errors.New("not a decimal count within its bound")
	errTime   = errors.New("not an RFC 3339 time of the years 0 to 9999 UTC")
	errResume = errors.New(`not "1" or "0"`)
)

// count parses a count header: a decimal from 0 to limit.
func count(v []byte, limit int) (int, error) {
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 0 || n > limit {
		return 0, errCount
	}
	return n, nil
}

// parseTime parses a time header: RFC 3339 whose instant, in UTC, falls
// in the years 0 to 9999, as timeHeader can write it back (a letter read
// keeps its times through its next hold).
func parseTime(v []byte) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, string(v))
	if y := t.UTC().Year(); err != nil || y < 0 || y > 9999 {
		return time.Time{}, errTime
	}
	return t, nil
}

// readHeaders fills l's history from rec's headers and returns the rest.
// A header whose name does not start with topology.ReservedHeaderPrefix
// goes into l.Headers (nil when there is none), whoever produced the
// record. Of a repeated header the last counts. A history header whose value no
// letter writes (a count out of its bound, a time that is not RFC 3339 or
// whose UTC year is outside 0 to 9999, a Resume neither "1" nor "0") is an
// error that shows at most the value's first bytes, a death's header too
// on a record without a death reason. A death's failure text longer than
// topology.MaxDeathErrorBytes is cut (topology.BoundDeathError).
func readHeaders[T any](rec *sarama.ConsumerMessage, l *topology.Letter[T]) (meta, error) {
	var m meta
	var d topology.Death
	dead := false
	for _, h := range rec.Headers {
		if h == nil {
			continue
		}
		v := h.Value
		var err error
		switch string(h.Key) {
		case HeaderShard:
			l.Shard, err = count(v, topology.MaxRoutingShards-1)
		case HeaderRetries:
			l.Retries, err = count(v, topology.MaxRetriesLimit)
		case HeaderFirstFailure:
			l.FirstFailure, err = parseTime(v)
		case HeaderLastFailure:
			l.LastFailure, err = parseTime(v)
		case HeaderResume:
			switch string(v) {
			case "1":
				l.Resume = true
			case "0":
				l.Resume = false
			default:
				err = errResume
			}
		case HeaderGroup:
			m.group = string(v)
		case HeaderTopic:
			m.topic = string(v)
		case HeaderDue:
			m.due, err = parseTime(v)
		case HeaderDeathReason:
			d.Reason, dead = topology.Reason(v), true
		case HeaderDeathError:
			d.Error = topology.BoundDeathError(string(v))
		case HeaderDeathTopic:
			d.Topic = string(v)
		case HeaderDeathGroup:
			d.Group = string(v)
		case HeaderDeathRetries:
			d.Retries, err = count(v, topology.MaxRetriesLimit)
		case HeaderDeathFirstFailure:
			d.FirstFailure, err = parseTime(v)
		case HeaderDeathLastFailure:
			d.LastFailure, err = parseTime(v)
		default:
			if k := string(h.Key); !topology.ReservedHeader(k) {
				if l.Headers == nil {
					l.Headers = make(topic.Headers, 2)
				}
				l.Headers[k] = string(v)
			}
		}
		if err != nil {
			return m, fmt.Errorf("kafkatopology: header %q = %s: %w", string(h.Key), quote.Value(string(v)), err)
		}
	}
	if len(rec.Key) > 0 {
		l.Key = string(rec.Key)
	}
	if dead {
		l.Death = &d
	}
	return m, nil
}
