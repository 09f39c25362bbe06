package topology_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// allValues receives, until it holds no more, what the reader subscribe
// adds holds, in order.
func allValues(t *testing.T, subscribe func(context.Context) (topology.Reader[int], error)) []int {
	t.Helper()
	r, err := subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	var got []int
	buf := make([]topology.Letter[int], 16)
	for {
		n, err := r.TryReceive(t.Context(), buf)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return got
		}
		for _, l := range buf[:n] {
			got = append(got, l.Value)
		}
	}
}

// uncountedDLQ hides from Replay how many letters the DLQ holds, as a
// broker backend does; its DLQ readers stop handing out letters after
// 1000 of them, so that a Replay that reads its own kept letters again
// ends.
type uncountedDLQ struct{ topology.Queues[int] }

func (q uncountedDLQ) SubscribeDead(ctx context.Context) (topology.Reader[int], error) {
	r, err := q.Queues.SubscribeDead(ctx)
	return &cappedReader{Reader: r, left: 1000}, err
}

type cappedReader struct {
	topology.Reader[int]
	left int
}

func (r *cappedReader) TryReceive(ctx context.Context, dst []topology.Letter[int]) (int, error) {
	if r.left == 0 {
		return 0, nil
	}
	n, err := r.Reader.TryReceive(ctx, dst[:min(len(dst), r.left)])
	r.left -= n
	return n, err
}

// Guarantee: a Replay that keeps some letters and replays others, over
// more letters than it reads at once, replays exactly the letters its
// filter selects, in their order, keeps exactly the others (those of
// another topic too), in their order, and offers the filter each letter
// once: with a DLQ reader that pins its end, the letters it keeps go
// back to the DLQ past that end as they are read, and with another
// reader once it has read the DLQ to its end, so it never reads them
// again. It holds whether or not the backend tells Replay how many
// letters its DLQ holds.
func TestReplayAcrossChunksReplaysAndKeepsEachLetterOnceInOrder(t *testing.T) {
	for _, c := range []struct {
		name string
		wrap func(topology.Queues[int]) topology.Queues[int]
	}{
		{"in memory", func(q topology.Queues[int]) topology.Queues[int] { return q }},
		{"a backend that does not count its DLQ", func(q topology.Queues[int]) topology.Queues[int] {
			return uncountedDLQ{q}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 2*64 + 5 // Replay reads 64 letters at a time
				_, mq := declareMemory(t, build(t, topology.New("chunks").DLQ()))
				keep := func(v int) bool { return v%3 == 0 || v == 64 || v == 127 }
				var replayed, kept, offered []int
				for v := range n {
					topic := "chunks"
					if v%10 == 9 {
						topic = "elsewhere"
					}
					if err := mq.DeadLetter(t.Context(), deadOf(topic, v)); err != nil {
						t.Fatal(err)
					}
					switch {
					case topic != "chunks":
						kept = append(kept, v)
					case keep(v):
						offered, kept = append(offered, v), append(kept, v)
					default:
						offered, replayed = append(offered, v), append(replayed, v)
					}
				}
				var filtered []int
				rep, err := topology.Replay(t.Context(), c.wrap(mq), topology.ReplayOptions[int]{Filter: func(l *topology.Letter[int]) bool {
					filtered = append(filtered, l.Value)
					return !keep(l.Value)
				}})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(filtered, offered) {
					t.Errorf("the filter was offered %v, want each letter of the topic once, in order: %v", filtered, offered)
				}
				if rep.ReplayedCount != len(replayed) || len(rep.Replayed) != len(replayed) || rep.Kept != len(kept) {
					t.Errorf("Replay reports %d replayed (%d listed) and %d kept, want %d and %d",
						rep.ReplayedCount, len(rep.Replayed), rep.Kept, len(replayed), len(kept))
				}
				if got := allValues(t, mq.Subscribe); !slices.Equal(got, replayed) {
					t.Errorf("the group received %v, want the replayed letters in order: %v", got, replayed)
				}
				if got := allValues(t, mq.SubscribeDead); !slices.Equal(got, kept) {
					t.Errorf("the DLQ holds %v after Replay, want the kept letters once each, in order: %v", got, kept)
				}
			})
		})
	}
}

// Guarantee: the report of a Replay lists at most MaxListed of the
// letters it replayed (on a dry run, selected), the first ones in order,
// and counts them all in ReplayedCount; MaxListed -1 lists none, 0 means
// DefaultReplayListed, and a value below -1 or past MaxReplayListed fails
// Replay, before it reads the DLQ, with an error naming the field.
func TestReplayListsAtMostMaxListedLettersAndCountsThemAll(t *testing.T) {
	if o := (topology.ReplayOptions[int]{}).WithDefaults(); o.MaxListed != topology.DefaultReplayListed {
		t.Errorf("default MaxListed %d, want %d", o.MaxListed, topology.DefaultReplayListed)
	}
	for _, c := range []struct {
		max, want int
		dry       bool
	}{{3, 3, false}, {3, 3, true}, {-1, 0, false}, {0, 10, false}, {10, 10, true}} {
		t.Run(fmt.Sprintf("MaxListed %d dry run %v", c.max, c.dry), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mq := withDeadLetters(t, "listed", 10)
				rep, err := topology.Replay(t.Context(), mq, topology.ReplayOptions[int]{MaxListed: c.max, DryRun: c.dry})
				if err != nil {
					t.Fatal(err)
				}
				var listed []int
				for _, l := range rep.Replayed {
					listed = append(listed, l.Value)
				}
				if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}[:c.want]; !slices.Equal(listed, want) || rep.ReplayedCount != 10 {
					t.Errorf("Replay lists %v and counts %d replayed, want %v and 10", listed, rep.ReplayedCount, want)
				}
			})
		})
	}
	for _, n := range []int{-2, topology.MaxReplayListed + 1} {
		mq := withDeadLetters(t, "invalid", 1)
		_, err := topology.Replay(t.Context(), mq, topology.ReplayOptions[int]{MaxListed: n})
		if err == nil || !strings.Contains(err.Error(), "replay.maxListed") {
			t.Errorf("MaxListed %d: Replay = %v, want an error naming replay.maxListed", n, err)
		}
		if got := dlqValues(t, mq); !slices.Equal(got, []int{0}) {
			t.Errorf("MaxListed %d: the DLQ holds %v, want [0] untouched", n, got)
		}
	}
}
