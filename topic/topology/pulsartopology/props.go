package pulsartopology

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/quote"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// The message properties a letter's history travels in. Absent properties
// are zero values; times are RFC 3339 with nanoseconds, in UTC, of the
// years 0 to 9999; counts are decimal, from 0 to
// topology.MaxRoutingShards-1 for the shard and to topology.MaxRetriesLimit
// for retries. A message with a history property outside that does not
// decode.
const (
	PropShard        = "topology-shard"
	PropRetries      = "topology-retries"
	PropFirstFailure = "topology-first-failure"
	PropLastFailure  = "topology-last-failure"
	PropResume       = "topology-resume"
	// PropGroup names the only consumer group a message is for: set on a
	// retry released from a hold topic and on a message put back on the
	// main topic for one group (Requeue, Replay). Every other group's
	// readers acknowledge it without delivering it.
	PropGroup = "topology-group"
	// The death metadata of a dead letter.
	PropDeathReason       = "topology-death-reason"
	PropDeathError        = "topology-death-error"
	PropDeathTopic        = "topology-death-topic"
	PropDeathGroup        = "topology-death-group"
	PropDeathRetries      = "topology-death-retries"
	PropDeathFirstFailure = "topology-death-first-failure"
	PropDeathLastFailure  = "topology-death-last-failure"
	// PropMarker marks a message a dead-letter reader publishes to its DLQ
	// to know when it has read everything before it (TryReceive). Readers
	// never deliver it.
	PropMarker = "topology-marker"
)

// properties encodes l's history, with group as its only consumer group
// when not empty, beside l's own Headers but the names starting with
// topology.ReservedHeaderPrefix, which are the history's; nil for a fresh
// letter without headers for every group (a publish).
func properties[T any](l *topology.Letter[T], group string) map[string]string {
	var p map[string]string
	put := func(k, v string) {
		if p == nil {
			p = make(map[string]string, 4+len(l.Headers))
		}
		p[k] = v
	}
	for k, v := range l.Headers {
		if !topology.ReservedHeader(k) {
			put(k, v)
		}
	}
	putTime := func(k string, t time.Time) {
		if !t.IsZero() {
			put(k, t.UTC().Format(time.RFC3339Nano))
		}
	}
	if l.Shard != 0 {
		put(PropShard, strconv.Itoa(l.Shard))
	}
	if l.Retries != 0 {
		put(PropRetries, strconv.Itoa(l.Retries))
	}
	putTime(PropFirstFailure, l.FirstFailure)
	putTime(PropLastFailure, l.LastFailure)
	if l.Resume {
		put(PropResume, "true")
	}
	if group != "" {
		put(PropGroup, group)
	}
	if d := l.Death; d != nil {
		put(PropDeathReason, string(d.Reason))
		put(PropDeathError, topology.BoundDeathError(d.Error))
		put(PropDeathTopic, d.Topic)
		put(PropDeathGroup, d.Group)
		put(PropDeathRetries, strconv.Itoa(d.Retries))
		putTime(PropDeathFirstFailure, d.FirstFailure)
		putTime(PropDeathLastFailure, d.LastFailure)
	}
	return p
}

// Why a history property does not decode: no letter carries such a value.
var (
	errCount  = errors.New("not a decimal count within its bound")
	errTime   = errors.New("not an RFC 3339 time of the years 0 to 9999 UTC")
	errResume = errors.New(`not "true" or "false"`)
)

// readProperties decodes a letter's history from p into l and returns the
// group the message is for ("" for every group). The properties whose
// names do not start with topology.ReservedHeaderPrefix go into
// l.Headers (nil when there is none), whoever produced the message. A history property whose
// value no letter carries (a count out of its bound: the shard from 0 to
// topology.MaxRoutingShards-1, retries from 0 to
// topology.MaxRetriesLimit; a time that is not RFC 3339 or whose UTC year
// is outside 0 to 9999; a resume that is neither "true" nor "false") is an
// error that shows at most the value's first bytes, a death's property
// too on a message without a death reason. A death's failure text longer
// than topology.MaxDeathErrorBytes is cut (topology.BoundDeathError).
func readProperties[T any](p map[string]string, l *topology.Letter[T]) (string, error) {
	var err error
	fail := func(k, v string, e error) {
		if err == nil {
			err = fmt.Errorf("property %s = %s: %w", k, quote.Value(v), e)
		}
	}
	num := func(k string, limit int) int {
		v, ok := p[k]
		if !ok {
			return 0
		}
		n, e := strconv.Atoi(v)
		if e != nil || n < 0 || n > limit {
			fail(k, v, errCount)
			return 0
		}
		return n
	}
	tm := func(k string) time.Time {
		v, ok := p[k]
		if !ok {
			return time.Time{}
		}
		// As putTime can write it back: a letter read keeps its times
		// through its next hold.
		t, e := time.Parse(time.RFC3339Nano, v)
		if y := t.UTC().Year(); e != nil || y < 0 || y > 9999 {
			fail(k, v, errTime)
			return time.Time{}
		}
		return t
	}
	l.Shard = num(PropShard, topology.MaxRoutingShards-1)
	l.Retries = num(PropRetries, topology.MaxRetriesLimit)
	l.FirstFailure = tm(PropFirstFailure)
	l.LastFailure = tm(PropLastFailure)
	switch v, ok := p[PropResume]; {
	case !ok || v == "false":
		l.Resume = false
	case v == "true":
		l.Resume = true
	default:
		fail(PropResume, v, errResume)
	}
	d := topology.Death{Error: topology.BoundDeathError(p[PropDeathError]), Topic: p[PropDeathTopic], Group: p[PropDeathGroup],
		Retries: num(PropDeathRetries, topology.MaxRetriesLimit), FirstFailure: tm(PropDeathFirstFailure), LastFailure: tm(PropDeathLastFailure)}
	if r, ok := p[PropDeathReason]; ok {
		// A copy, so that only a dead letter's Death is allocated: the
		// death properties are read on every message, to refuse a
		// malformed one without a reason too.
		dead := d
		dead.Reason = topology.Reason(r)
		l.Death = &dead
	}
	l.Headers = nil
	for k, v := range p {
		if !topology.ReservedHeader(k) {
			if l.Headers == nil {
				l.Headers = make(topic.Headers, 2)
			}
			l.Headers[k] = v
		}
	}
	return p[PropGroup], err
}
