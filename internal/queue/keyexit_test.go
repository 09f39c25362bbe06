package queue

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"
)

// Guarantee: when the key function ends the goroutine (runtime.Goexit)
// in PublishBatchTakenFirst, the items published before (the windows
// before the one whose keys were being computed) are set to the zero
// value and the others are left as they were, so that the caller's
// deferred code can tell which items no queue took; nothing of the window
// under way is published.
func TestPartitionedPublishBatchTakenFirstZeroesThePublishedItemsWhenKeyExits(t *testing.T) {
	// 2 partitions of 2: windows of 4 items; the key exits on "x", the
	// 2nd item of the 2nd window.
	p := NewPartitioned(2, 2, func(s *string) string {
		if *s == "x" {
			runtime.Goexit()
		}
		return *s
	})
	words := []string{"a", "b", "c", "d", "e", "x", "f"}
	items := make([]*string, len(words))
	for i := range words {
		items[i] = &words[i]
	}
	orig := slices.Clone(items)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = p.PublishBatchTakenFirst(context.Background(), items)
		t.Error("PublishBatchTakenFirst returned; the key function ended its goroutine")
	}()
	<-done
	for i, it := range items {
		if want := i >= 4; (it != nil) != want || it != nil && it != orig[i] {
			t.Errorf("item %d after the exit: %v, want it left as it was: %t", i, it, want)
		}
	}
	if n := p.Queued(); n != 4 {
		t.Errorf("%d items queued, want the first window's 4", n)
	}
}

// Guarantee: when the key function ends the goroutine (runtime.Goexit),
// PublishBatchProgress and TryPublishBatchProgress have set *progress to
// how many items the queues took, and those are the first ones, so that
// the caller's deferred code can give the others their outcome; the
// items are left as they were.
func TestPartitionedProgressCountsThePublishedPrefixWhenKeyExits(t *testing.T) {
	cases := []struct {
		name    string
		words   []string
		publish func(p *Partitioned[*string], items []*string, progress *int)
		want    int
	}{
		// 2 partitions of 2: windows of 4 items; the key exits on "x",
		// the 2nd item of the 2nd window: the first window is published.
		{name: "PublishBatchProgress", words: []string{"a", "b", "c", "d", "e", "x", "f"}, want: 4,
			publish: func(p *Partitioned[*string], items []*string, progress *int) {
				_, _ = p.PublishBatchProgress(context.Background(), items, progress, nil, time.Time{})
			}},
		// Runs of one key go over one at a time: "a a" is published
		// once "b" ends the run; the key exits on "x", which would end
		// the run of "b".
		{name: "TryPublishBatchProgress", words: []string{"a", "a", "b", "x", "c"}, want: 2,
			publish: func(p *Partitioned[*string], items []*string, progress *int) {
				_, _ = p.TryPublishBatchProgress(items, progress, nil, time.Time{})
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPartitioned(2, 2, func(s *string) string {
				if *s == "x" {
					runtime.Goexit()
				}
				return *s
			})
			items := make([]*string, len(tc.words))
			for i := range tc.words {
				items[i] = &tc.words[i]
			}
			orig := slices.Clone(items)
			progress := -1
			done := make(chan struct{})
			go func() {
				defer close(done)
				tc.publish(p, items, &progress)
				t.Error("the publish returned; the key function ended its goroutine")
			}()
			<-done
			if progress != tc.want {
				t.Errorf("progress %d after the exit, want %d", progress, tc.want)
			}
			if n := p.Queued(); n != tc.want {
				t.Errorf("%d items queued, want %d", n, tc.want)
			}
			if !slices.Equal(items, orig) {
				t.Error("the items were changed")
			}
		})
	}
}
