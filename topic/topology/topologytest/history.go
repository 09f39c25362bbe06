package topologytest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// HistoryKeys names the entries (Kafka record headers, Pulsar message
// properties) a backend writes a letter's history in, and the values it
// writes for a true and a false Letter.Resume.
type HistoryKeys struct {
	Shard, Retries, FirstFailure, LastFailure, Resume, Group                                           string
	DeathReason, DeathError, DeathTopic, DeathGroup, DeathRetries, DeathFirstFailure, DeathLastFailure string
	ResumeTrue, ResumeFalse                                                                            string
}

// HistoryCase is the history a record or message written by another
// producer carries, and what a backend's reader makes of it.
type HistoryCase struct {
	Name string
	// Entries are key, value pairs in the order they were written; of a
	// repeated key the last counts.
	Entries []string
	// Refused names the key whose value the reader refuses: no letter
	// carries it, so the record or message does not decode ("" when it
	// decodes).
	Refused string
	// Want is the history it decodes to (its value and key unset), and
	// Group the consumer group it is for.
	Want  topology.Letter[Msg]
	Group string
}

// HistoryCases returns the histories, for a backend writing them under k,
// that another producer may write: counts, times and Resume values no
// letter carries, which are refused, and the forms of valid ones each
// backend reads the same way.
func HistoryCases(k HistoryKeys) []HistoryCase {
	at := time.Date(2026, 1, 2, 3, 4, 5, 500000000, time.UTC)
	long := strings.Repeat("x", topology.MaxDeathErrorBytes+1)
	dead := func(d topology.Death) topology.Letter[Msg] { return topology.Letter[Msg]{Death: &d} }
	cs := []HistoryCase{
		{Name: "none"},
		{Name: "unknown key", Entries: []string{"topology-future", "x"}},
		{Name: "shard", Entries: []string{k.Shard, "7"}, Want: topology.Letter[Msg]{Shard: 7}},
		{Name: "last shard", Entries: []string{k.Shard, strconv.Itoa(topology.MaxRoutingShards - 1)}, Want: topology.Letter[Msg]{Shard: topology.MaxRoutingShards - 1}},
		{Name: "shard past the last", Entries: []string{k.Shard, strconv.Itoa(topology.MaxRoutingShards)}, Refused: k.Shard},
		{Name: "negative shard", Entries: []string{k.Shard, "-1"}, Refused: k.Shard},
		{Name: "empty shard", Entries: []string{k.Shard, ""}, Refused: k.Shard},
		{Name: "signed retries", Entries: []string{k.Retries, "+7"}, Want: topology.Letter[Msg]{Retries: 7}},
		{Name: "zero-padded retries", Entries: []string{k.Retries, "007"}, Want: topology.Letter[Msg]{Retries: 7}},
		{Name: "most retries", Entries: []string{k.Retries, strconv.Itoa(topology.MaxRetriesLimit)}, Want: topology.Letter[Msg]{Retries: topology.MaxRetriesLimit}},
		{Name: "retries past the limit", Entries: []string{k.Retries, strconv.Itoa(topology.MaxRetriesLimit + 1)}, Refused: k.Retries},
		{Name: "retries past int64", Entries: []string{k.Retries, "9223372036854775808"}, Refused: k.Retries},
		{Name: "negative retries", Entries: []string{k.Retries, "-3"}, Refused: k.Retries},
		{Name: "empty retries", Entries: []string{k.Retries, ""}, Refused: k.Retries},
		{Name: "first failure", Entries: []string{k.FirstFailure, "2026-01-02T03:04:05.5Z"}, Want: topology.Letter[Msg]{FirstFailure: at}},
		{Name: "first failure with an offset", Entries: []string{k.FirstFailure, "2026-01-02T04:04:05.5+01:00"}, Want: topology.Letter[Msg]{FirstFailure: at}},
		{Name: "first year", Entries: []string{k.FirstFailure, "0000-01-01T00:00:00Z"}, Want: topology.Letter[Msg]{FirstFailure: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{Name: "last year", Entries: []string{k.LastFailure, "9999-12-31T23:59:59.999999999Z"}, Want: topology.Letter[Msg]{LastFailure: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}},
		{Name: "before year 0 in UTC", Entries: []string{k.FirstFailure, "0000-01-01T00:00:00+01:00"}, Refused: k.FirstFailure},
		{Name: "after year 9999 in UTC", Entries: []string{k.LastFailure, "9999-12-31T23:59:59-01:00"}, Refused: k.LastFailure},
		{Name: "five-digit year", Entries: []string{k.LastFailure, "10000-01-01T00:00:00Z"}, Refused: k.LastFailure},
		{Name: "offset of a day", Entries: []string{k.FirstFailure, "2026-01-02T03:04:05.5+24:00"}, Want: topology.Letter[Msg]{FirstFailure: at.Add(-24 * time.Hour)}},
		{Name: "time without its T", Entries: []string{k.FirstFailure, "2026-01-02 03:04:05Z"}, Refused: k.FirstFailure},
		{Name: "empty time", Entries: []string{k.LastFailure, ""}, Refused: k.LastFailure},
		{Name: "resume", Entries: []string{k.Resume, k.ResumeTrue}, Want: topology.Letter[Msg]{Resume: true}},
		{Name: "no resume", Entries: []string{k.Resume, k.ResumeFalse}},
		{Name: "group", Entries: []string{k.Group, "billing"}, Group: "billing"},
		{Name: "group not UTF-8", Entries: []string{k.Group, "\xff\xfe"}, Group: "\xff\xfe"},
		{Name: "empty group", Entries: []string{k.Group, ""}},
		{Name: "repeated counts", Entries: []string{k.Retries, "1", k.Retries, "2", k.Group, "a", k.Group, "b"}, Want: topology.Letter[Msg]{Retries: 2}, Group: "b"},
		{Name: "repeated resume", Entries: []string{k.Resume, k.ResumeTrue, k.Resume, k.ResumeFalse}},
		{Name: "death", Entries: []string{k.DeathReason, string(topology.ReasonMaxRetries), k.DeathError, "boom", k.DeathTopic, "orders",
			k.DeathGroup, "billing", k.DeathRetries, "3", k.DeathFirstFailure, "2026-01-02T03:04:05.5Z", k.DeathLastFailure, "2026-01-02T03:04:05.5Z"},
			Want: dead(topology.Death{Reason: topology.ReasonMaxRetries, Error: "boom", Topic: "orders", Group: "billing", Retries: 3, FirstFailure: at, LastFailure: at})},
		{Name: "reason unknown to this version", Entries: []string{k.DeathReason, "exploded"}, Want: dead(topology.Death{Reason: "exploded"})},
		{Name: "empty reason", Entries: []string{k.DeathReason, ""}, Want: dead(topology.Death{})},
		{Name: "death text not UTF-8", Entries: []string{k.DeathReason, "rejected", k.DeathError, "\xff\n\x1b[31m", k.DeathGroup, "\xfe"},
			Want: dead(topology.Death{Reason: topology.ReasonRejected, Error: "\xff\n\x1b[31m", Group: "\xfe"})},
		{Name: "death text past its bound", Entries: []string{k.DeathReason, "rejected", k.DeathError, long},
			Want: dead(topology.Death{Reason: topology.ReasonRejected, Error: topology.BoundDeathError(long)})},
		{Name: "death without a reason", Entries: []string{k.DeathError, "boom", k.DeathTopic, "orders", k.DeathRetries, "3"}},
		{Name: "negative death retries", Entries: []string{k.DeathReason, "rejected", k.DeathRetries, "-1"}, Refused: k.DeathRetries},
		{Name: "empty death retries", Entries: []string{k.DeathReason, "rejected", k.DeathRetries, ""}, Refused: k.DeathRetries},
		{Name: "death time after year 9999 in UTC", Entries: []string{k.DeathReason, "rejected", k.DeathLastFailure, "9999-12-31T23:59:59-01:00"}, Refused: k.DeathLastFailure},
		{Name: "death time before year 0 in UTC", Entries: []string{k.DeathReason, "rejected", k.DeathFirstFailure, "0000-01-01T00:00:00+01:00"}, Refused: k.DeathFirstFailure},
		{Name: "death retries without a reason", Entries: []string{k.DeathRetries, "-1"}, Refused: k.DeathRetries},
		{Name: "death time without a reason", Entries: []string{k.DeathFirstFailure, "yesterday"}, Refused: k.DeathFirstFailure},
	}
	for _, v := range []string{"1", "0", "true", "false", "True", "yes", " 1", ""} {
		if v != k.ResumeTrue && v != k.ResumeFalse {
			cs = append(cs, HistoryCase{Name: "resume " + strconv.Quote(v), Entries: []string{k.Resume, v}, Refused: k.Resume})
		}
	}
	for _, v := range []string{"0x10", "1e3", "7.0", " 7", "7 ", "٣", "1_000"} {
		cs = append(cs, HistoryCase{Name: "retries " + strconv.Quote(v), Entries: []string{k.Retries, v}, Refused: k.Retries})
	}
	return cs
}

// CheckHistory runs HistoryCases(k) through read, a backend's reader of
// the history a record or message carries in entries (key, value pairs,
// in order), which returns the letter's history, the group it is for and
// an error, and reports every case read decodes otherwise: a refused
// value must be an error naming its key, any other must decode to the
// case's history and group.
func CheckHistory(t *testing.T, k HistoryKeys, read func(entries []string) (topology.Letter[Msg], string, error)) {
	t.Helper()
	for _, c := range HistoryCases(k) {
		t.Run(c.Name, func(t *testing.T) {
			l, group, err := read(c.Entries)
			switch {
			case c.Refused != "" && err == nil:
				t.Fatalf("%s decoded, want it refused for %s", shortEntries(c.Entries), c.Refused)
			case c.Refused != "" && !strings.Contains(err.Error(), c.Refused):
				t.Fatalf("%s refused with %v, want an error naming %s", shortEntries(c.Entries), err, c.Refused)
			case c.Refused != "":
				return
			case err != nil:
				t.Fatalf("%s refused: %v", shortEntries(c.Entries), err)
			}
			if l.Death != nil && len(l.Death.Error) > topology.MaxDeathErrorBytes {
				t.Fatalf("%s decoded to a death text of %d bytes, want at most topology.MaxDeathErrorBytes (%d)",
					shortEntries(c.Entries), len(l.Death.Error), topology.MaxDeathErrorBytes)
			}
			if d := LetterDiff(c.Want, l); d != "" || group != c.Group {
				t.Fatalf("%s decoded to %s; group %q, want %q", shortEntries(c.Entries), shortText(d), group, c.Group)
			}
		})
	}
}

// shortText returns s, or its first bytes and how many it had when it is
// longer than a failure message should quote.
func shortText(s string) string {
	const most = 120
	if len(s) <= most {
		return s
	}
	return s[:most] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// shortEntries quotes entries, each value at most shortText's length.
func shortEntries(entries []string) string {
	q := make([]string, len(entries))
	for i, e := range entries {
		q[i] = strconv.Quote(shortText(e))
	}
	return "[" + strings.Join(q, " ") + "]"
}
