package queue

import (
	"context"
	"runtime"
	"slices"
	"testing"
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
