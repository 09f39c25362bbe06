package claim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logattr"
)

// maxLine is the most bytes a member's log line about a commit may take,
// whatever the partitions in it: well under the 16 KiB at which log
// pipelines start to truncate or drop lines.
const maxLine = 4 << 10

// Guarantee: a commit the broker does not accept, or refuses because the
// group rebalances, over thousands of partitions is logged as one line of
// at most maxLine bytes, naming the first logattr.MaxListed partitions and
// counting them all; Stats' LastCommitError still lists every partition.
func TestCommitFailureOverManyPartitionsLogsOneBoundedLine(t *testing.T) {
	const parts = 4000
	for _, tc := range []struct {
		name        string
		rebalancing bool
		msg         string
	}{
		{"failed", false, "kafka commit failed"},
		{"refused while rebalancing", true, "kafka commit refused while the group rebalances"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			m := NewMember("g", "s", slog.New(slog.NewTextHandler(&buf, nil)), false)
			refusal := errors.New("kafka server: the provided generation id is not the current generation")
			if tc.rebalancing {
				m.Rebalancing = func(err error) bool { return errors.Is(err, refusal) }
			}
			for i := range parts {
				c := New(Config{Topic: "events", Partition: int32(i), Committed: 0, Start: 0})
				c.Marked.Store(10)
				m.Add(c)
			}
			send := func(_ context.Context, blocks []Block) ([]Block, error) {
				for i := range blocks {
					blocks[i].Err = refusal
				}
				return blocks, nil
			}
			if err := m.Commit(context.Background(), nil, send); err == nil {
				t.Fatal("a commit whose every partition was refused returned nil")
			}
			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			if len(lines) != 1 {
				t.Fatalf("%d log lines, want 1: %q", len(lines), lines)
			}
			line := lines[0]
			if !strings.Contains(line, tc.msg) {
				t.Fatalf("line %.200q... is not %q", line, tc.msg)
			}
			if len(line) > maxLine {
				t.Fatalf("the line of a commit of %d partitions is %d bytes, want at most %d: %.300q...", parts, len(line), maxLine, line)
			}
			if want := fmt.Sprintf(" partitions_count=%d ", parts); !strings.Contains(line, want) {
				t.Errorf("line %q does not count the partitions (%q)", line, want)
			}
			if n := strings.Count(line, "events/"); n != logattr.MaxListed {
				t.Errorf("line names %d partitions, want %d: %q", n, logattr.MaxListed, line)
			}
			if got := len(m.Stats().LastCommitError.Partitions); got != parts {
				t.Errorf("LastCommitError lists %d partitions, want %d", got, parts)
			}
		})
	}
}

// Guarantee: a burst of failed commits (a cluster gone: every partition's
// release and the periodic commit fail within milliseconds) is one WARN
// line, and the member's FlushLogs, as it closes, logs one more counting
// the failures held back; Stats counts each.
func TestABurstOfFailedCommitsIsOneLineAndACount(t *testing.T) {
	const commits = 24
	var buf bytes.Buffer
	m := NewMember("g", "s", slog.New(slog.NewTextHandler(&buf, nil)), false)
	c := New(Config{Topic: "events", Partition: 0, Committed: 0, Start: 0})
	m.Add(c)
	gone := errors.New("kafka: client has run out of available brokers to talk to")
	for i := range commits {
		c.Marked.Store(int64(10 + i))
		if err := m.Commit(context.Background(), nil, func(context.Context, []Block) ([]Block, error) { return nil, gone }); err == nil {
			t.Fatal("a commit the cluster did not take returned nil")
		}
	}
	m.FlushLogs()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "kafka commit failed") ||
		!strings.Contains(lines[1], fmt.Sprintf("held_back=%d", commits-1)) {
		t.Fatalf("%d failed commits logged %d lines, want the first and one counting the %d others: %q", commits, len(lines), commits-1, lines)
	}
	if n := m.Stats().CommitErrors; n != commits {
		t.Errorf("Stats().CommitErrors = %d, want %d", n, commits)
	}
}

// Guarantee: a partition that keeps rewinding to one failed offset logs its
// 1st, 2nd, 4th, … rewind and then every RewindLogEvery-th, each line
// counting the rewinds in a row; a rewind to another offset starts the
// count again and is logged at once.
func TestRewindsToOneOffsetAreLoggedAtGrowingIntervals(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	c := New(Config{Topic: "events", Partition: 0, Committed: 0, Start: 0})
	const rewinds = 3 * RewindLogEvery
	for range rewinds {
		c.LogRewind(log, 10, time.Second)
	}
	c.LogRewind(log, 50, time.Second)
	var got []string
	for line := range strings.Lines(buf.String()) {
		if !strings.Contains(line, `msg="kafka partition rewinds to redeliver a failed message"`) {
			t.Fatalf("unexpected line %q", line)
		}
		f := strings.Fields(line)
		got = append(got, strings.Join(f[len(f)-3:], " "))
	}
	var want []string
	for n := 1; n <= rewinds; n++ {
		if n&(n-1) == 0 || n%RewindLogEvery == 0 {
			want = append(want, fmt.Sprintf("offset=10 rewinds=%d backoff=1s", n))
		}
	}
	want = append(want, "offset=50 rewinds=1 backoff=1s")
	if !slices.Equal(got, want) {
		t.Fatalf("%d rewinds to offset 10, then one to 50, logged\n%s\nwant\n%s", rewinds, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
