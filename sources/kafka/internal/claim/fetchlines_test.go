package claim

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logattr"
	"github.com/boulevard-go/boulevard/internal/repeatlog"
)

// fetchLines returns buf's lines.
func fetchLines(buf *bytes.Buffer) []string {
	return strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
}

// Guarantee: failed fetches that begin alike (one topic, one error) on
// thousands of partitions, as when the topic is deleted or its broker
// goes away, are one WARN line naming the topic, the first partition and
// the error, whatever their count; its repeat, repeatlog.First after it,
// says "(still)", names the topic, the first logattr.MaxListed of the
// partitions and counts them all, at most maxLine bytes; another error
// on a partition in no run, or another topic, has its own line.
func TestFetchFailuresAlikeOnManyPartitionsAreOneLineAndACount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const parts = 4000
		var buf bytes.Buffer
		m := NewMember("g", "s", slog.New(slog.NewTextHandler(&buf, nil)), false)
		gone := errors.New("UNKNOWN_TOPIC_ID: This server does not host this topic ID.")
		for range 3 { // the client fetches again after each failure
			for p := range int32(parts) {
				m.FetchFailed("events", p, gone)
			}
		}
		m.FetchFailed("events", parts, errors.New("another"))
		m.FetchFailed("other", 0, gone)
		lines := fetchLines(&buf)
		if len(lines) != 3 {
			t.Fatalf("%d partitions failing alike, then two others, logged %d lines, want 3:\n%s", parts, len(lines), strings.Join(lines, "\n"))
		}
		for i, want := range []string{"topic=events partition=0 error=", fmt.Sprintf("topic=events partition=%d error=another", parts), "topic=other partition=0 error="} {
			if !strings.Contains(lines[i], "level=WARN") || !strings.Contains(lines[i], want) {
				t.Fatalf("line %d is %q, want a WARN line with %q", i, lines[i], want)
			}
		}
		time.Sleep(repeatlog.First - time.Second) // fetched again, failing, within repeatlog.Quiet
		m.FetchFailed("events", 2, gone)
		time.Sleep(time.Second)
		m.FetchFailed("events", 1, gone)
		lines = fetchLines(&buf)
		if len(lines) != 4 {
			t.Fatalf("a failure %v on logged %d lines, want a repeat:\n%s", repeatlog.First, len(lines)-3, strings.Join(lines[3:], "\n"))
		}
		still := lines[3]
		for _, want := range []string{`msg="kafka consumer error (still)"`, " topic=events ",
			fmt.Sprintf(" partitions_count=%d ", parts), fmt.Sprintf(" failures=%d", 3*parts+2), "UNKNOWN_TOPIC_ID"} {
			if !strings.Contains(still, want) {
				t.Errorf("the repeat lacks %q: %.400q", want, still)
			}
		}
		if n := strings.Count(still, "events/"); n != logattr.MaxListed {
			t.Errorf("the repeat names %d partitions, want %d: %.400q", n, logattr.MaxListed, still)
		}
		if len(still) > maxLine {
			t.Errorf("the repeat is %d bytes, want at most %d", len(still), maxLine)
		}
	})
}

// Guarantee: a run of failed fetches over many partitions ends with one
// INFO line, naming the topic, the first partition and the error, and
// counting the partitions, when the last of them fetches records again,
// none before; a partition fetching again after its run ended, or the
// member closing then, logs nothing; the member closing ends the runs
// still going on, each with its INFO line.
func TestFetchFailuresEndWithOneLineWhenTheirPartitionsFetchAgainOrTheMemberCloses(t *testing.T) {
	const parts = 300
	var buf bytes.Buffer
	m := NewMember("g", "s", slog.New(slog.NewTextHandler(&buf, nil)), false)
	down := errors.New("kafka: client has run out of available brokers to talk to: EOF")
	for p := range int32(parts) {
		m.FetchFailed("events", p, down)
		m.FetchFailed("events", p, down)
	}
	m.FetchFailed("other", 3, down)
	for p := range int32(parts - 1) {
		m.FetchedAgain("events", p)
	}
	if lines := fetchLines(&buf); len(lines) != 2 {
		t.Fatalf("all but one partition fetching again logged %q, want nothing", lines[2:])
	}
	m.FetchedAgain("events", parts-1)
	m.FetchedAgain("events", 0)
	lines := fetchLines(&buf)
	if len(lines) != 3 {
		t.Fatalf("the last partition fetching again logged %q, want one line", lines[2:])
	}
	for _, want := range []string{"level=INFO", `msg="kafka consumer error ended"`, " topic=events partition=0 error=",
		fmt.Sprintf(" failures=%d ", 2*parts), fmt.Sprintf(" partitions_count=%d", parts)} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("the end line lacks %q: %q", want, lines[2])
		}
	}
	m.FlushLogs()
	m.FlushLogs()
	lines = fetchLines(&buf)
	if len(lines) != 4 || !strings.Contains(lines[3], "level=INFO") || !strings.Contains(lines[3], " topic=other partition=3 ") ||
		!strings.Contains(lines[3], " partitions_count=1") {
		t.Fatalf("the member closing logged %q, want one INFO line ending the run of topic other", lines[3:])
	}
}

// Guarantee: a partition whose fetch error changes its text from one
// failure to the next while the cluster is out of reach (sarama's "run out
// of available brokers" lists the brokers' errors of each attempt) stays
// in its run: one WARN line, and one INFO line once it fetches again, not
// a line pair per change.
func TestAFetchErrorWhoseTextChangesWhileItFailsIsOneRun(t *testing.T) {
	var buf bytes.Buffer
	m := NewMember("g", "s", slog.New(slog.NewTextHandler(&buf, nil)), false)
	texts := []string{"kafka: client has run out of available brokers to talk to: EOF; EOF; EOF",
		"kafka: client has run out of available brokers to talk to: EOF; EOF; EOF; EOF"}
	for i := range 20 {
		m.FetchFailed("events", 0, errors.New(texts[i%2]))
	}
	m.FetchedAgain("events", 0)
	lines := fetchLines(&buf)
	if len(lines) != 2 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[1], "level=INFO") {
		t.Fatalf("a partition failing 20 times with errors of two alternating texts, then fetching again, logged:\n%s\nwant one WARN line and one INFO line", strings.Join(lines, "\n"))
	}
}

// Guarantee: a session whose assignment leaves out partitions of the
// member's runs of failed fetches takes them out (another member fetches
// them now), and those it keeps stay: a run left with none ends with one
// INFO line saying so (reason=revoked), a run keeping one goes on, and
// ends, without that reason, once the partition fetches again; the run of
// another topic's partition the session keeps goes on too.
func TestASessionEndsTheRunsOfThePartitionsItLeavesOutAndKeepsTheOthers(t *testing.T) {
	var buf bytes.Buffer
	m := NewMember("g", "s", slog.New(slog.NewTextHandler(&buf, nil)), false)
	down := errors.New("UNKNOWN_SERVER_ERROR")
	for p := range int32(4) {
		m.FetchFailed("events", p, down)
	}
	m.FetchFailed("events", 4, errors.New("another"))
	m.FetchFailed("other", 0, down)
	m.NoteSession("m1", 2, map[string][]int32{"events": {0, 5}, "other": {0}})
	lines := fetchLines(&buf)
	if len(lines) != 4 || !strings.Contains(lines[3], "level=INFO") || !strings.Contains(lines[3], "topic=events partition=4 ") ||
		!strings.Contains(lines[3], " "+repeatlog.ReasonKey+"="+repeatlog.ReasonRevoked) {
		t.Fatalf("a session keeping events/0 and other/0 logged:\n%s\nwant one INFO line ending the run of events/4, revoked", strings.Join(lines[3:], "\n"))
	}
	m.FetchedAgain("events", 0)
	m.FetchedAgain("other", 0)
	lines = fetchLines(&buf)
	if len(lines) != 6 || strings.Contains(lines[4]+lines[5], repeatlog.ReasonKey+"=") ||
		!strings.Contains(lines[4], "topic=events partition=0 ") || !strings.Contains(lines[4], "partitions_count=4") ||
		!strings.Contains(lines[5], "topic=other partition=0 ") {
		t.Fatalf("the kept partitions fetching again logged:\n%s\nwant one INFO line ending each of their runs, without a reason", strings.Join(lines[4:], "\n"))
	}
	m.FlushLogs()
	if got := fetchLines(&buf); len(got) != 6 {
		t.Fatalf("the member closing, its runs over, logged %q", got[6:])
	}
}

// Guarantee: a failed fetch of a partition the member's last session did
// not assign, reported after the session began (the client fetched it
// before), starts no run: the member no longer reads the partition, so
// nothing would ever end the run while the member runs; a failure of a
// partition the session assigned still begins one.
func TestAFailedFetchOfAPartitionTheSessionLeftOutBeginsNoRun(t *testing.T) {
	var buf bytes.Buffer
	m := NewMember("g", "s", slog.New(slog.NewTextHandler(&buf, nil)), false)
	down := errors.New("UNKNOWN_SERVER_ERROR")
	m.FetchFailed("events", 1, down)
	m.NoteSession("m1", 2, map[string][]int32{"events": {0}})
	m.FetchFailed("events", 1, down)
	m.FetchFailed("other", 0, down)
	lines := fetchLines(&buf)
	if len(lines) != 2 || !strings.Contains(lines[1], repeatlog.ReasonKey+"="+repeatlog.ReasonRevoked) {
		t.Fatalf("partition 1 failing, then left out of the session and reported failing again, logged:\n%s\nwant its WARN line and its end, revoked, only", strings.Join(lines, "\n"))
	}
	m.FetchFailed("events", 0, down)
	if lines = fetchLines(&buf); len(lines) != 3 || !strings.Contains(lines[2], "level=WARN") || !strings.Contains(lines[2], "topic=events partition=0 ") {
		t.Fatalf("a failed fetch of the assigned partition 0 logged:\n%s\nwant its WARN line", strings.Join(lines[2:], "\n"))
	}
	m.FlushLogs()
	if lines = fetchLines(&buf); len(lines) != 4 || !strings.Contains(lines[3], "topic=events partition=0 ") {
		t.Fatalf("the member closing logged:\n%s\nwant the end of partition 0's run only", strings.Join(lines[3:], "\n"))
	}
}
