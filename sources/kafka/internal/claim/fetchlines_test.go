package claim

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/internal/logattr"
)

// Guarantee: runs of failed fetches that start alike (one topic, one
// error) on thousands of partitions, as when the topic is deleted or its
// broker goes away, are one WARN line for the first partition and, as the
// member closes (FlushLogs), one more naming the topic, the first
// logattr.MaxListed of the others and counting them all, at most maxLine
// bytes; another error, or another topic, has its own line.
func TestFetchFailuresAlikeOnManyPartitionsAreOneLineAndACount(t *testing.T) {
	const parts = 4000
	var buf bytes.Buffer
	m := NewMember("g", "s", slog.New(slog.NewTextHandler(&buf, nil)), false)
	gone := errors.New("UNKNOWN_TOPIC_ID: This server does not host this topic ID.")
	for p := range int32(parts) {
		m.FetchFailed("events", p, gone, slog.String("topic", "events"), slog.Int("partition", int(p)), slog.Any("error", gone))
	}
	another := errors.New("another")
	m.FetchFailed("events", 7, another, slog.String("topic", "events"), slog.Int("partition", 7), slog.Any("error", another))
	m.FetchFailed("other", 0, gone, slog.String("topic", "other"), slog.Int("partition", 0))
	before := strings.Count(buf.String(), "\n")
	m.FlushLogs()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if before != 3 || len(lines) != 4 {
		t.Fatalf("%d partitions failing alike, then two others, logged %d lines, and %d more as the member closed, want 3 and 1:\n%s",
			parts, before, len(lines)-before, strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[0], "partition=0 ") || !strings.Contains(lines[1], "error=another") || !strings.Contains(lines[2], "topic=other") {
		t.Fatalf("the lines logged at once are not the first partition's, the other error's and the other topic's:\n%s", strings.Join(lines[:3], "\n"))
	}
	held := lines[3]
	for _, want := range []string{`msg="kafka consumer error (held back since the last line)"`, " topic=events ",
		fmt.Sprintf(" partitions_count=%d ", parts-1), fmt.Sprintf(" held_back=%d ", parts-1), "UNKNOWN_TOPIC_ID"} {
		if !strings.Contains(held, want) {
			t.Errorf("the closing line lacks %q: %.400q", want, held)
		}
	}
	if n := strings.Count(held, "events/"); n != logattr.MaxListed {
		t.Errorf("the closing line names %d partitions, want %d: %.400q", n, logattr.MaxListed, held)
	}
	if len(held) > maxLine {
		t.Errorf("the closing line is %d bytes, want at most %d", len(held), maxLine)
	}
}
