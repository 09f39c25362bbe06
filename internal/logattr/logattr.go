// Package logattr bounds the log attributes that list what a source can
// have thousands of (partitions, topics, keys): a line names the first
// MaxListed items and counts them all, so that its size does not grow
// with the list while it still says which items and how many. Log
// pipelines truncate or drop lines past 16–64 KiB; a list of 4,000
// partitions is 40 KiB and more.
package logattr

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
)

// MaxListed is the most items of a list one log attribute names (List,
// Partitions); the attribute's count says how many there are in all.
const MaxListed = 32

// CountEnding ends the name of the attribute that counts a list's items:
// "partitions_count" for the list "partitions".
const CountEnding = "_count"

// List returns, as one attribute, key with the first MaxListed of items
// (in their order; as their String when they are fmt.Stringers, so that a
// JSON handler shows them too) and key+CountEnding with len(items). The
// two are a group without a key, which slog's handlers inline:
// "partitions=[t/0 t/1 …] partitions_count=4000". items is read, not kept.
func List[T any](key string, items []T) slog.Attr {
	shown := items[:min(len(items), MaxListed)]
	var v slog.Value
	if strs, ok := stringers(shown); ok {
		v = slog.AnyValue(strs)
	} else {
		v = slog.AnyValue(slices.Clone(shown))
	}
	return slog.Attr{Value: slog.GroupValue(slog.Attr{Key: key, Value: v}, slog.Int(key+CountEnding, len(items)))}
}

// stringers returns items' String when they are fmt.Stringers.
func stringers[T any](items []T) ([]string, bool) {
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, ok := any(it).(fmt.Stringer)
		if !ok {
			return nil, false
		}
		out = append(out, s.String())
	}
	return out, true
}

// Partitions is List for partitions grouped by topic, as Kafka clients
// report a member's claims: the items are "topic/partition", by topic
// name, then in each topic's order, and the count is every topic's
// partitions.
func Partitions(key string, byTopic map[string][]int32) slog.Attr {
	topics := make([]string, 0, len(byTopic))
	n := 0
	for t, ps := range byTopic {
		topics = append(topics, t)
		n += len(ps)
	}
	slices.SortFunc(topics, cmp.Compare)
	shown := make([]string, 0, min(n, MaxListed))
	for _, t := range topics {
		for _, p := range byTopic[t] {
			if len(shown) == MaxListed {
				break
			}
			shown = append(shown, t+"/"+strconv.Itoa(int(p)))
		}
	}
	return slog.Attr{Value: slog.GroupValue(slog.Any(key, shown), slog.Int(key+CountEnding, n))}
}
