package claim

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/boulevard-go/boulevard/internal/logattr"
	"github.com/boulevard-go/boulevard/internal/logburst"
)

// FetchFailedLog is the WARN line of a partition's run of failed fetches
// (one its client fetches again after).
const FetchFailedLog = "kafka consumer error"

// fetchKind is the runs of failed fetches that start alike: on
// partitions of one topic, with one message.
type fetchKind struct{ topic, msg string }

// fetchBurst is what a member knows of one fetchKind: when its last line
// was logged, and the partitions whose runs were held back since (the
// first logattr.MaxListed of them, and their count).
type fetchBurst struct {
	logged time.Time
	held   []string
	count  int
	err    error
}

// FetchFailed logs at WARN (FetchFailedLog) the start of a run of failed
// fetches of topic/part (a client's FailureRuns picks which failures
// start one) with err, the partition's error, and attrs, the client's
// attributes naming the partition and the error. The runs that start
// alike (the same topic, the same message of err) within
// logburst.Interval of such a line are held back: a topic deleted, or a
// broker gone, fails every partition it has at once, and that is one
// event, not one per partition. The next line of their kind, or
// FlushLogs as the member closes, logs one more naming the topic, the
// first logattr.MaxListed of the partitions held back and their count
// (also as logburst.HeldBackKey).
func (m *Member) FetchFailed(topic string, part int32, err error, attrs ...slog.Attr) {
	k := fetchKind{topic, err.Error()}
	now := time.Now()
	m.fetchMu.Lock()
	b := m.fetchLines[k]
	if b != nil && now.Sub(b.logged) < logburst.Interval {
		if len(b.held) < logattr.MaxListed {
			b.held = append(b.held, topic+"/"+strconv.Itoa(int(part)))
		}
		b.count++
		b.err = err
		m.fetchMu.Unlock()
		return
	}
	if m.fetchLines == nil {
		m.fetchLines = make(map[fetchKind]*fetchBurst)
	}
	for ok, ob := range m.fetchLines {
		// A kind no line was logged of for an interval holds nothing
		// back that a line would not tell: forget it.
		if ob.count == 0 && now.Sub(ob.logged) >= logburst.Interval {
			delete(m.fetchLines, ok)
		}
	}
	var held *fetchBurst
	if b != nil && b.count > 0 {
		held = &fetchBurst{held: b.held, count: b.count, err: b.err}
	}
	m.fetchLines[k] = &fetchBurst{logged: now}
	m.fetchMu.Unlock()
	if held != nil {
		m.heldFetchLine(topic, held)
	}
	m.Log.LogAttrs(context.Background(), slog.LevelWarn, FetchFailedLog, attrs...)
}

// flushFetchLines logs, for each kind of failed fetches with runs held
// back since its last line, one line naming them (see FetchFailed), and
// forgets every kind.
func (m *Member) flushFetchLines() {
	m.fetchMu.Lock()
	lines := m.fetchLines
	m.fetchLines = nil
	m.fetchMu.Unlock()
	for k, b := range lines {
		if b.count > 0 {
			m.heldFetchLine(k.topic, b)
		}
	}
}

// heldFetchLine logs the line naming the partitions of topic whose runs
// of failed fetches b held back.
func (m *Member) heldFetchLine(topic string, b *fetchBurst) {
	m.Log.LogAttrs(context.Background(), slog.LevelWarn, FetchFailedLog+logburst.HeldBackSuffix,
		slog.String("topic", topic), slog.Any("partitions", b.held), slog.Int("partitions"+logattr.CountEnding, b.count),
		slog.Int(logburst.HeldBackKey, b.count), slog.Any("error", b.err))
}
