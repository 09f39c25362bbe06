// Package repeatlog keeps a failure that goes on to a few log lines. A
// Kafka client retries what fails (a fetch, a group session) many times a
// second, each time with the same error, while the cluster cannot be
// reached: a run of such failures is logged when it begins, then once
// First after that, each later line twice as long after the one before,
// up to Max apart, with the count of failures so far, and once at INFO
// when it ends. The Kafka topic and topology backends share it, so do the
// Kafka sources (their members' failed fetches), and so
// does sources/pulsar's adapter of pulsar-client-go's logs.
package repeatlog

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/internal/logattr"
)

// Log lines of a failure that goes on: the first when it begins, then one
// after First, and each following one twice as long after the last, up to
// Max apart.
const (
	First = time.Minute
	Max   = time.Hour
)

// Quiet is how long after a run's last failure the next one begins a new
// run, logged as a first line, when nothing was seen to end the run (a
// partition that fetches nothing says nothing of fetching again).
const Quiet = First

// The attributes and the message suffix of the lines that follow a run's
// first.
const (
	// SinceKey is the time the run began.
	SinceKey = "since"
	// FailuresKey counts the run's failures so far.
	FailuresKey = "failures"
	// StillSuffix ends the message of a repeat: the first line's, then
	// this.
	StillSuffix = " (still)"
)

// Gaps picks which of a failure's repeats to log: the first, then one
// First after it, each later one twice as long after the last logged, up
// to Max. The zero value is ready; it is not safe for concurrent use.
type Gaps struct {
	next time.Time
	gap  time.Duration
}

// Due reports whether a failure at now is to be logged.
func (g *Gaps) Due(now time.Time) bool {
	if !g.next.IsZero() && now.Before(g.next) {
		return false
	}
	switch {
	case g.gap == 0:
		g.gap = First
	case g.next.IsZero():
	default:
		g.gap = min(2*g.gap, Max)
	}
	g.next = now.Add(g.gap)
	return true
}

// Event is what the lines of a failure say.
type Event struct {
	// Level is the level of the run's lines but the last, which is INFO.
	Level slog.Level
	// Msg is the message of the run's first line, and, followed by
	// StillSuffix, of its repeats.
	Msg string
	// Ended is the message of the INFO line that ends the run.
	Ended string
	// Attrs are the attributes of the failure's line; those of the run's
	// first failure are those of the line that ends it.
	Attrs []slog.Attr
}

// run is one run of failures.
type run struct {
	since, last time.Time
	failures    int
	gaps        Gaps
	ended       string
	attrs       []slog.Attr // the first failure's
}

// Runs are the runs of failures of one owner, one per key K (a partition,
// an error's text), each logged when it begins, at growing intervals
// while it goes on (see Gaps) and once when it ends. The zero value is
// ready, and safe for concurrent use; set Log and Bound before the first
// failure.
type Runs[K comparable] struct {
	// Log is where the lines go; nil means slog.Default().
	Log *slog.Logger
	// Bound, when positive, is the most runs kept: a failure of a new key
	// past it forgets the runs going on first (without their end lines),
	// for keys that vary without end, such as error texts naming
	// addresses or offsets.
	Bound int
	// Idle is how long after a run's last failure the next failure of its
	// key begins a new run, logged as a first line; zero means Quiet. Set
	// it above the longest wait between the retries of a failure that
	// goes on (a client that backs off up to a minute and more between
	// its attempts needs more than Quiet). When Idle is set, a run idle
	// for that long is also forgotten, without its end line, when another
	// run begins, so that runs nothing ends (an owner gone while it
	// failed) do not stay.
	Idle time.Duration

	n  atomic.Int32 // len(m): End reads it without the lock
	mu sync.Mutex
	m  map[K]*run
}

// Fail counts a failure of key k and logs it when due: ev at ev.Level when
// it begins a run (the first of k, or the first Idle after the last),
// then its repeats at the intervals of Gaps with SinceKey and FailuresKey;
// the others are only counted.
func (rs *Runs[K]) Fail(ctx context.Context, k K, ev Event) {
	now := time.Now()
	idle, prune := rs.Idle, rs.Idle > 0
	if !prune {
		idle = Quiet
	}
	rs.mu.Lock()
	r := rs.m[k]
	if r != nil && now.Sub(r.last) >= idle {
		r = nil
	}
	begins := r == nil
	if begins {
		if prune {
			for ok, or := range rs.m {
				if now.Sub(or.last) >= idle {
					delete(rs.m, ok)
				}
			}
		}
		if rs.m == nil || rs.Bound > 0 && len(rs.m) >= rs.Bound && rs.m[k] == nil {
			rs.m = map[K]*run{}
		}
		r = &run{since: now, ended: ev.Ended, attrs: ev.Attrs}
		rs.m[k] = r
		rs.n.Store(int32(len(rs.m)))
	}
	r.failures++
	r.last = now
	due := r.gaps.Due(now)
	since, failures := r.since, r.failures
	rs.mu.Unlock()
	if !due {
		return
	}
	if begins {
		rs.logger().LogAttrs(ctx, ev.Level, ev.Msg, ev.Attrs...)
		return
	}
	attrs := append(ev.Attrs[:len(ev.Attrs):len(ev.Attrs)], slog.Time(SinceKey, since), slog.Int(FailuresKey, failures))
	rs.logger().LogAttrs(ctx, ev.Level, ev.Msg+StillSuffix, attrs...)
}

// Going reports whether a run goes on, for an owner that looks for the
// end of its runs only then. It costs an atomic load.
func (rs *Runs[K]) Going() bool { return rs.n.Load() > 0 }

func (rs *Runs[K]) logger() *slog.Logger {
	if rs.Log == nil {
		return slog.Default()
	}
	return rs.Log
}

// End ends the run of key k, if one goes on, with its INFO line: the
// Ended message and the attributes of its first failure, with SinceKey
// and FailuresKey. It costs an atomic load when no run goes on.
func (rs *Runs[K]) End(ctx context.Context, k K) {
	if rs.n.Load() == 0 {
		return
	}
	rs.mu.Lock()
	r := rs.m[k]
	if r != nil {
		delete(rs.m, k)
		rs.n.Store(int32(len(rs.m)))
	}
	rs.mu.Unlock()
	if r != nil {
		r.logEnd(ctx, rs.logger())
	}
}

// EndAll ends every run going on, each with its INFO line (see End).
func (rs *Runs[K]) EndAll(ctx context.Context) {
	if rs.n.Load() == 0 {
		return
	}
	rs.mu.Lock()
	m := rs.m
	rs.m = nil
	rs.n.Store(0)
	rs.mu.Unlock()
	for _, r := range m {
		r.logEnd(ctx, rs.logger())
	}
}

func (r *run) logEnd(ctx context.Context, log *slog.Logger) {
	attrs := append(r.attrs[:len(r.attrs):len(r.attrs)], slog.Time(SinceKey, r.since), slog.Int(FailuresKey, r.failures))
	log.LogAttrs(ctx, slog.LevelInfo, r.ended, attrs...)
}

// Partition names a partition a consumer fetches: its number, for a
// consumer of one topic, or a TopicPartition, for one of several.
type Partition interface{ int32 | TopicPartition }

// TopicPartition is a partition of a consumer that reads several topics.
type TopicPartition struct {
	Topic string
	Part  int32
}

// String is "topic/partition", as the repeats of a run list it.
func (p TopicPartition) String() string { return p.Topic + "/" + strconv.Itoa(int(p.Part)) }

// split is the topic ("" for a consumer of one topic) and the number of p.
func split[P Partition](p P) (string, int32) {
	switch p := any(p).(type) {
	case TopicPartition:
		return p.Topic, p.Part
	case int32:
		return "", p
	}
	panic("unreachable")
}

// comparePartitions orders partitions by topic, then by number.
func comparePartitions[P Partition](a, b P) int {
	at, ap := split(a)
	bt, bp := split(b)
	if c := cmp.Compare(at, bt); c != 0 {
		return c
	}
	return cmp.Compare(ap, bp)
}

// Partitions are the runs of fetch errors of a Kafka consumer of one
// topic's partitions; see Fetches.
type Partitions = Fetches[int32]

// Fetches are the runs of fetch errors of a Kafka consumer's partitions,
// a run per cause: the partitions whose fetches fail with causes of one
// text (and, for a consumer of several topics, on one topic), as when the
// cluster is out of reach or an ACL denies READ on the topic, share one
// run, logged as one line when it begins, not one per partition, its
// repeats at the intervals of Gaps, and one INFO line when the last of
// its partitions delivers a record, or, with ReasonKey, when the last
// leaves the consumer (Drop). Set Msg and Log before the first
// failure. The zero value is otherwise ready, and safe for
// concurrent use.
type Fetches[P Partition] struct {
	// Msg is the message of the runs' WARN lines: their first lines',
	// followed by StillSuffix of their repeats', and followed by " ended"
	// of the INFO lines that end them.
	Msg string
	// Log is where the lines go; nil means slog.Default().
	Log *slog.Logger

	n     atomic.Int32 // len(of): Fetched reads it without the lock
	mu    sync.Mutex
	of    map[P]*partsRun[P]        // by partition
	alike map[alikeKey]*partsRun[P] // by the topic and the text of the cause
}

// alikeKey is what the partitions of one run share.
type alikeKey struct{ topic, cause string }

// partsRun is a run of fetch errors shared by the partitions failing
// alike.
type partsRun[P Partition] struct {
	run
	key     alikeKey
	failing map[P]struct{} // its partitions that have not delivered since
	had     map[P]struct{} // the partitions it had, each once
}

// PartitionsKey names the partitions of a run of fetch errors on the
// lines that follow its first: its repeats list those failing (the first
// logattr.MaxListed, and their count as PartitionsKey+logattr.CountEnding),
// its end line counts those it had.
const PartitionsKey = "partitions"

// ReasonKey is the attribute, ReasonRevoked its value, of the INFO line
// that ends a run of fetch errors whose partitions have all left the
// consumer (Drop) rather than fetched again: the cause may go on, on the
// consumer they went to.
const (
	ReasonKey     = "reason"
	ReasonRevoked = "revoked"
)

func (ps *Fetches[P]) logger() *slog.Logger {
	if ps.Log == nil {
		return slog.Default()
	}
	return ps.Log
}

// Fail counts err, a fetch error of partition part, logged at WARN with
// Msg when due. cause is what the partition failed with, without naming
// the partition (a sarama.ConsumerError's Err; nil means err): the
// partitions (of one topic) whose causes have the same text fail alike
// and share one run. Its first line carries attrs, the partition (and
// its topic) and err of the failure that began it; its repeats attrs,
// the topic, the partitions failing (PartitionsKey), cause, SinceKey and
// FailuresKey, the failures of all of them. A partition stays in its
// run, whatever it fails with next, until it delivers a record (Fetched):
// a cause whose text changes from one failure to the next (sarama's "run
// out of available brokers", which lists the brokers' errors of the
// attempt) is not a run begun and ended each time. A partition in no run
// begins, or joins, the run of its cause's text.
func (ps *Fetches[P]) Fail(ctx context.Context, part P, err, cause error, attrs ...slog.Attr) {
	if cause == nil {
		cause = err
	}
	topic, num := split(part)
	key := alikeKey{topic, cause.Error()}
	now := time.Now()
	ps.mu.Lock()
	r := ps.of[part]
	if r != nil && now.Sub(r.last) >= Quiet {
		r = nil
	}
	if r == nil {
		r = ps.alike[key]
		if r != nil && now.Sub(r.last) >= Quiet {
			r = nil
		}
	}
	begins := r == nil
	if begins {
		// Runs idle for Quiet are forgotten, without their end lines:
		// their partitions' next failures begin a run again.
		for k, or := range ps.alike {
			if now.Sub(or.last) >= Quiet {
				delete(ps.alike, k)
			}
		}
		for p, or := range ps.of {
			if now.Sub(or.last) >= Quiet {
				delete(ps.of, p)
			}
		}
		if ps.alike == nil {
			ps.alike, ps.of = map[alikeKey]*partsRun[P]{}, map[P]*partsRun[P]{}
		}
		first := attrs
		if topic != "" {
			first = append(first[:len(first):len(first)], slog.String("topic", topic))
		}
		r = &partsRun[P]{run: run{since: now, ended: ps.Msg + " ended",
			attrs: append(first, slog.Int("partition", int(num)), slog.Any("error", err))},
			key: key, failing: map[P]struct{}{}, had: map[P]struct{}{}}
		ps.alike[key] = r
	}
	if old := ps.of[part]; old != r {
		if old != nil {
			old.leave(ps, part) // a run idle for Quiet: forgotten
		}
		ps.of[part] = r
		r.failing[part] = struct{}{}
		r.had[part] = struct{}{}
		ps.n.Store(int32(len(ps.of)))
	}
	r.failures++
	r.last = now
	due := r.gaps.Due(now)
	var line []slog.Attr
	if due && !begins {
		line = attrs[:len(attrs):len(attrs)]
		if topic != "" {
			line = append(line, slog.String("topic", topic))
		}
		line = append(line, r.listed(), slog.Any("error", cause),
			slog.Time(SinceKey, r.since), slog.Int(FailuresKey, r.failures))
	}
	ps.mu.Unlock()
	switch {
	case !due:
	case begins:
		ps.logger().LogAttrs(ctx, slog.LevelWarn, ps.Msg, r.attrs...)
	default:
		ps.logger().LogAttrs(ctx, slog.LevelWarn, ps.Msg+StillSuffix, line...)
	}
}

// leave takes part out of r, the lock held, and reports whether r has no
// partition left, then forgotten.
func (r *partsRun[P]) leave(ps *Fetches[P], part P) bool {
	delete(r.failing, part)
	if len(r.failing) > 0 {
		return false
	}
	if ps.alike[r.key] == r {
		delete(ps.alike, r.key)
	}
	return true
}

// listed is the attribute naming r's partitions failing, in order.
func (r *partsRun[P]) listed() slog.Attr {
	parts := slices.SortedFunc(maps.Keys(r.failing), comparePartitions[P])
	return logattr.List(PartitionsKey, parts)
}

// logEnd logs r's end line: the attributes of its first failure, SinceKey,
// FailuresKey, the count of the partitions it had (each once, however
// often it left the run and joined it again), and extra.
func (r *partsRun[P]) logEnd(ctx context.Context, log *slog.Logger, extra ...slog.Attr) {
	attrs := append(r.attrs[:len(r.attrs):len(r.attrs)], slog.Time(SinceKey, r.since), slog.Int(FailuresKey, r.failures),
		slog.Int(PartitionsKey+logattr.CountEnding, len(r.had)))
	attrs = append(attrs, extra...)
	log.LogAttrs(ctx, slog.LevelInfo, r.ended, attrs...)
}

// Fetched takes partition part out of its run of errors, if any: it
// delivered a record. The run ends, with its INFO line, when it was the
// last of the run's partitions. It costs an atomic load when no run goes
// on.
func (ps *Fetches[P]) Fetched(ctx context.Context, part P) {
	if ps.n.Load() == 0 {
		return
	}
	ps.mu.Lock()
	r := ps.of[part]
	ended := false
	if r != nil {
		delete(ps.of, part)
		ps.n.Store(int32(len(ps.of)))
		ended = r.leave(ps, part)
	}
	ps.mu.Unlock()
	if ended {
		r.logEnd(ctx, ps.logger())
	}
}

// Drop takes the partitions gone reports true for out of their runs of
// errors: the consumer no longer fetches them (a rebalance gave them to
// another). A run left with no partition ends with its INFO line, with
// ReasonKey ReasonRevoked; the others go on, their repeats listing the
// partitions left. gone is called with the lock held, once for each
// partition in a run. It costs an atomic load when no run goes on.
func (ps *Fetches[P]) Drop(ctx context.Context, gone func(P) bool) {
	if ps.n.Load() == 0 {
		return
	}
	var ended []*partsRun[P]
	ps.mu.Lock()
	for p, r := range ps.of {
		if !gone(p) {
			continue
		}
		delete(ps.of, p)
		if r.leave(ps, p) {
			ended = append(ended, r)
		}
	}
	ps.n.Store(int32(len(ps.of)))
	ps.mu.Unlock()
	for _, r := range ended {
		r.logEnd(ctx, ps.logger(), slog.String(ReasonKey, ReasonRevoked))
	}
}

// EndAll ends every run, each with its INFO line, however many of its
// partitions have not delivered a record since.
func (ps *Fetches[P]) EndAll(ctx context.Context) {
	if ps.n.Load() == 0 {
		return
	}
	ps.mu.Lock()
	ended := make(map[*partsRun[P]]struct{}, len(ps.alike))
	for _, r := range ps.of {
		ended[r] = struct{}{}
	}
	ps.of, ps.alike = nil, nil
	ps.n.Store(0)
	ps.mu.Unlock()
	for r := range ended {
		r.logEnd(ctx, ps.logger())
	}
}

// Group is the runs of failures of a Kafka consumer group member on one
// topic: its sessions' (one run), its partitions' fetch errors (a run per
// cause: the partitions failing alike share one; see Partitions) and its
// group's other errors (a run per error text, at most MaxTexts). Its
// lines' messages begin with Prefix (the package's name); set Prefix and
// Log before the first failure. Safe for concurrent use.
type Group struct {
	// Prefix begins the lines' messages, as "kafkatopic".
	Prefix string
	// Log is where the lines go; nil means slog.Default().
	Log *slog.Logger

	once     sync.Once
	sessions Runs[struct{}]
	texts    Runs[string]
	parts    Partitions
}

// MaxTexts is the most runs of a Group's errors without a partition kept
// at once (see Runs.Bound).
const MaxTexts = 64

func (g *Group) init() {
	g.once.Do(func() {
		g.sessions.Log, g.texts.Log, g.parts.Log = g.Log, g.Log, g.Log
		g.texts.Bound = MaxTexts
		g.parts.Msg = g.Prefix + ": consumer group error"
	})
}

// SessionFailed counts a group session that failed (attrs name the topic,
// the group and the error), logged at WARN as "<Prefix>: consumer group
// session failed; joining again" when due.
func (g *Group) SessionFailed(ctx context.Context, attrs ...slog.Attr) {
	g.init()
	g.sessions.Fail(ctx, struct{}{}, Event{Level: slog.LevelWarn, Msg: g.Prefix + ": consumer group session failed; joining again",
		Ended: g.Prefix + ": consumer group session started again", Attrs: attrs})
}

// Error counts err, an error of the group (attrs name the topic and the
// group), logged at WARN as "<Prefix>: consumer group error" when due.
//
// With part negative it is an error of the group's own, a run per error
// text, its lines carrying attrs and the error.
//
// Otherwise it is partition part's error, and cause what the partition
// failed with, without naming the partition (a sarama.ConsumerError's
// Err; nil means err): the partitions failing alike share one run, until
// each delivers a record (Fetched) or a session starts (see
// Partitions.Fail).
func (g *Group) Error(ctx context.Context, part int32, err, cause error, attrs ...slog.Attr) {
	g.init()
	if part < 0 {
		msg := g.Prefix + ": consumer group error"
		g.texts.Fail(ctx, err.Error(), Event{Level: slog.LevelWarn, Msg: msg, Ended: msg + " ended",
			Attrs: append(attrs, slog.Any("error", err))})
		return
	}
	g.parts.Fail(ctx, part, err, cause, attrs...)
}

// Fetched takes partition part out of its run of errors, if any: it
// delivered a record. The run ends, with its INFO line, when it was the
// last of the run's partitions. It costs an atomic load when no run goes
// on.
func (g *Group) Fetched(ctx context.Context, part int32) { g.parts.Fetched(ctx, part) }

// Started ends every run, each with its INFO line: a group session
// started, so the cluster answers.
func (g *Group) Started(ctx context.Context) {
	g.sessions.EndAll(ctx)
	g.texts.EndAll(ctx)
	g.parts.EndAll(ctx)
}
