package logattr_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/internal/logattr"
)

type tp struct {
	topic string
	part  int32
}

func (p tp) String() string { return p.topic + "/" + strconv.Itoa(int(p.part)) }

// Guarantee: a list of any length logs as at most MaxListed items, the
// first ones in order, and a count of them all, in text and in JSON; a
// list of Stringers logs as their strings, which a JSON handler shows.
func TestListNamesTheFirstMaxListedItemsAndCountsThemAll(t *testing.T) {
	for _, n := range []int{0, 3, logattr.MaxListed, logattr.MaxListed + 1, 4000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			items := make([]tp, n)
			for i := range items {
				items[i] = tp{"events", int32(i)}
			}
			var buf bytes.Buffer
			slog.New(slog.NewJSONHandler(&buf, nil)).Info("m", logattr.List("partitions", items))
			var got struct {
				Partitions      []string `json:"partitions"`
				PartitionsCount int      `json:"partitions_count"`
			}
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("%v: %s", err, buf.String())
			}
			if want := min(n, logattr.MaxListed); len(got.Partitions) != want || got.PartitionsCount != n {
				t.Fatalf("%d items logged as %d named, count %d; want %d named, count %d: %s",
					n, len(got.Partitions), got.PartitionsCount, want, n, buf.String())
			}
			for i, s := range got.Partitions {
				if want := fmt.Sprintf("events/%d", i); s != want {
					t.Fatalf("item %d logged as %q, want %q", i, s, want)
				}
			}
			buf.Reset()
			slog.New(slog.NewTextHandler(&buf, nil)).Info("m", logattr.List("partitions", items))
			if want := fmt.Sprintf(" partitions_count=%d\n", n); !strings.HasSuffix(buf.String(), want) {
				t.Fatalf("text line %q does not end with %q", buf.String(), want)
			}
			if max := 512; buf.Len() > max {
				t.Fatalf("text line of %d items is %d bytes, want at most %d", n, buf.Len(), max)
			}
		})
	}
}

// Guarantee: partitions grouped by topic log as at most MaxListed
// "topic/partition" items, by topic name, and a count of every topic's
// partitions.
func TestPartitionsNamesTheFirstMaxListedAndCountsEveryTopic(t *testing.T) {
	byTopic := map[string][]int32{"b": make([]int32, 3000), "a": make([]int32, 1000)}
	for i := range byTopic["a"] {
		byTopic["a"][i] = int32(i)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("m", logattr.Partitions("claims", byTopic))
	if !strings.Contains(buf.String(), " claims=\"[a/0 a/1 a/2 ") || !strings.HasSuffix(buf.String(), " claims_count=4000\n") {
		t.Fatalf("line %q does not name a/0 first and count 4000", buf.String())
	}
	if got := strings.Count(buf.String(), "a/"); got != logattr.MaxListed {
		t.Fatalf("line names %d partitions, want %d: %s", got, logattr.MaxListed, buf.String())
	}
	buf.Reset()
	slog.New(slog.NewTextHandler(&buf, nil)).Info("m", logattr.Partitions("claims", map[string][]int32{"t": {2, 1}}))
	if !strings.Contains(buf.String(), ` claims="[t/2 t/1]" claims_count=2`) {
		t.Fatalf("line %q does not name t/2 t/1 and count 2", buf.String())
	}
}

// Guarantee: items that are not fmt.Stringers log as themselves, and List
// copies them: a change to the slice after List does not show in the
// line, which a handler may write later.
func TestListLogsItemsThatAreNotStringersAsTheyWere(t *testing.T) {
	items := []int32{1, 2, 3}
	attr := logattr.List("partitions", items)
	items[0] = 9
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("m", attr)
	if want := ` partitions="[1 2 3]" partitions_count=3`; !strings.Contains(buf.String(), want) {
		t.Fatalf("line %q does not contain %q", buf.String(), want)
	}
}
