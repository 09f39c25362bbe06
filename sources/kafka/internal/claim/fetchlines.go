package claim

import (
	"context"
	"log/slog"

	"github.com/boulevard-go/boulevard/internal/repeatlog"
)

// FetchFailedLog is the WARN line of a run of failed fetches (one its
// client fetches again after); followed by repeatlog.StillSuffix, of its
// repeats, and by FetchEndedSuffix, of the INFO line that ends it.
const FetchFailedLog = "kafka consumer error"

// FetchEndedSuffix ends the message of the INFO line that ends a run of
// failed fetches: its partitions fetch records again, or the member
// closes, or its last partitions leave the member at a rebalance (the
// line then has repeatlog.ReasonKey=repeatlog.ReasonRevoked).
const FetchEndedSuffix = " ended"

// FetchFailed counts a failed fetch of topic/part with err, the
// partition's error (its client calls it for each: it fetches again
// after), logged at WARN (FetchFailedLog) when due (repeatlog.Fetches).
// A run of failures of the partition begins with its first failure, or
// the first after it fetched records again (FetchedAgain), and goes on
// whatever it fails with meanwhile (the message of a client out of
// brokers changes with each attempt). The runs that begin alike (the
// same topic, the same message of err) while one of them goes on are one:
// a topic deleted, or a broker gone, fails every partition it has at
// once, and that is one event, not one per partition. Its first line
// names the topic, the partition and err, with attrs (the client's
// attributes, without the topic and the partition); its repeats, at
// growing intervals while it goes on, the first logattr.MaxListed of the
// partitions failing, their count, and the count of failures; one INFO
// line (FetchFailedLog+FetchEndedSuffix) ends it when the last of its
// partitions fetches records again, or as the member closes (FlushLogs).
// A partition not in a new session's assignment leaves its run
// (NoteSession): a run whose last partition leaves ends with its INFO
// line, saying so (repeatlog.ReasonKey); a failure of a partition the
// last session did not assign (a fetch its client made before the
// session, reported after it) is not counted: the member no longer reads
// the partition, and the run would outlive the member's claim.
func (m *Member) FetchFailed(topic string, part int32, err error, attrs ...slog.Attr) {
	tp := repeatlog.TopicPartition{Topic: topic, Part: part}
	m.fetchMu.Lock()
	defer m.fetchMu.Unlock()
	if m.assigned != nil {
		if _, ok := m.assigned[tp]; !ok {
			return
		}
	}
	m.fetches.Fail(context.Background(), tp, err, nil, attrs...)
}

// FetchedAgain tells of records fetched from topic/part: the run of
// failed fetches it was in, if any, ends with its INFO line when it was
// its last partition. It costs an atomic load while no fetch fails.
func (m *Member) FetchedAgain(topic string, part int32) {
	m.fetches.Fetched(context.Background(), repeatlog.TopicPartition{Topic: topic, Part: part})
}

// endFetchRuns ends every run of failed fetches, each with its INFO line.
func (m *Member) endFetchRuns() { m.fetches.EndAll(context.Background()) }

// fetchesLeft records claims, the session's assignment by topic, as the
// partitions whose failed fetches count (FetchFailed) and takes the others
// out of their runs of failed fetches, ending those left with none.
func (m *Member) fetchesLeft(claims map[string][]int32) {
	kept := map[repeatlog.TopicPartition]struct{}{}
	for topic, parts := range claims {
		for _, part := range parts {
			kept[repeatlog.TopicPartition{Topic: topic, Part: part}] = struct{}{}
		}
	}
	m.fetchMu.Lock()
	defer m.fetchMu.Unlock()
	m.assigned = kept
	m.fetches.Drop(context.Background(), func(p repeatlog.TopicPartition) bool {
		_, ok := kept[p]
		return !ok
	})
}
