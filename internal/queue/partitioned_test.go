package queue

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Guarantee: KeyPartition is FNV-1a of the key modulo n, as documented, so a
// key's partition is reproducible outside this package.
func TestKeyPartitionIsFNV1a(t *testing.T) {
	for _, key := range []string{"", "a", "customer-42", "ключ"} {
		for _, n := range []int{2, 3, 7, 64} {
			h := fnv.New64a()
			h.Write([]byte(key))
			if got, want := KeyPartition(key, n), int(h.Sum64()%uint64(n)); got != want {
				t.Errorf("KeyPartition(%q, %d) = %d, want FNV-1a %d", key, n, got, want)
			}
		}
	}
	if KeyPartition("x", 1) != 0 || KeyPartition("x", 0) != 0 {
		t.Error("with at most one partition every key must map to 0")
	}
}

// Guarantee: PublishBatch returns an error whenever it did not publish
// every item: a partition that refused its items is reported even when a
// later partition took its own.
func TestPartitionedPublishReportsPartialFailure(t *testing.T) {
	p := NewPartitioned(2, 8, func(s string) string { return s })
	var k0, k1 string
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		switch KeyPartition(k, 2) {
		case 0:
			k0 = k
		case 1:
			k1 = k
		}
	}
	if k0 == "" || k1 == "" {
		t.Fatal("test setup: need a key for each partition")
	}
	p.Partition(0).Close()
	n, err := p.PublishBatch(context.Background(), []string{k0, k1})
	// Whether partition 1 took its item is left open; the error is not.
	if !errors.Is(err, ErrClosed) || n > 1 {
		t.Fatalf("PublishBatch with partition 0 closed = %d, %v; want at most 1, ErrClosed", n, err)
	}
}

// Guarantee: in a batch that mixes keys, in runs and alone (PublishBatch
// hashes a key only when it differs from the previous item's), every item
// reaches its key's partition, in order.
func TestPartitionedRoutesRunsAndSingleKeys(t *testing.T) {
	p := NewPartitioned(3, 64, func(s string) string { return s[:1] })
	batch := []string{"a1", "a2", "a3", "b1", "c1", "b2", "b3", "a4", "c2", "c3", "a5"}
	if n, err := p.PublishBatch(context.Background(), batch); n != len(batch) || err != nil {
		t.Fatalf("PublishBatch = %d, %v", n, err)
	}
	want := map[int][]string{}
	for _, it := range batch {
		i := KeyPartition(it[:1], 3)
		want[i] = append(want[i], it)
	}
	for i := range 3 {
		q := p.Partition(i)
		got := make([]string, 0, q.Len())
		buf := make([]string, 64)
		for q.Len() > 0 {
			n, err := q.TryReceive(buf)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, buf[:n]...)
		}
		if len(got) != len(want[i]) {
			t.Fatalf("partition %d holds %v, want %v", i, got, want[i])
		}
		for j := range got {
			if got[j] != want[i][j] {
				t.Fatalf("partition %d holds %v, want %v", i, got, want[i])
			}
		}
	}
}

// Guarantee: a batch many times larger than the queues hold together
// (PublishBatch takes it a window at a time) reaches every partition
// whole and in order while receivers drain them, and a context that ends
// while it waits stops it with ctx's error and the count of what it
// published.
func TestPartitionedLargeBatchKeepsOrder(t *testing.T) {
	p := NewPartitioned(3, 4, func(s string) string { return s[:1] })
	var batch []string
	want := map[int][]string{}
	for i := range 3000 {
		it := fmt.Sprintf("%c%d", 'a'+i%5, i)
		batch = append(batch, it)
		k := KeyPartition(it[:1], 3)
		want[k] = append(want[k], it)
	}
	got := make([][]string, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			buf := make([]string, 4)
			for {
				n, err := p.Partition(i).Receive(context.Background(), buf)
				got[i] = append(got[i], buf[:n]...)
				if err != nil {
					return
				}
			}
		})
	}
	n, err := p.PublishBatch(context.Background(), batch)
	p.Close()
	wg.Wait()
	if n != len(batch) || err != nil {
		t.Fatalf("PublishBatch = %d, %v; want %d, nil", n, err, len(batch))
	}
	for i := range 3 {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("partition %d received %d items out of order or incomplete, want %d in publish order", i, len(got[i]), len(want[i]))
		}
	}

	full := NewPartitioned(3, 4, func(s string) string { return s[:1] })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	n, err = full.PublishBatch(ctx, batch)
	if !errors.Is(err, context.DeadlineExceeded) || n != full.Queued() || n == 0 || n > 12 {
		t.Fatalf("PublishBatch with nobody receiving = %d (%d queued), %v; want what the queues hold, DeadlineExceeded", n, full.Queued(), err)
	}
}

// Guarantee: TryPublishBatch never blocks and publishes the longest prefix
// whose partitions have room: it stops at the first item its partition
// cannot take, so no item passes one that stayed behind, and it reports a
// closed partition.
func TestPartitionedTryPublishBatchPrefix(t *testing.T) {
	key := func(s string) string { return s[:1] }
	var k0, k1 string
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if KeyPartition(k, 2) == 0 && k0 == "" {
			k0 = k
		}
		if KeyPartition(k, 2) == 1 && k1 == "" {
			k1 = k
		}
	}
	p := NewPartitioned(2, 2, key)
	// Partition 0 takes two items; the third item of k0 does not fit, so
	// the k1 item after it must not be published either.
	batch := []string{k1 + "1", k0 + "1", k0 + "2", k0 + "3", k1 + "2"}
	n, err := p.TryPublishBatch(batch)
	if n != 3 || err != nil {
		t.Fatalf("TryPublishBatch = %d, %v; want the prefix of 3 that fits, nil", n, err)
	}
	if l0, l1 := p.Partition(0).Len(), p.Partition(1).Len(); l0 != 2 || l1 != 1 {
		t.Fatalf("partitions hold %d and %d items, want 2 and 1", l0, l1)
	}
	// Full partition 0 first: nothing is published.
	if n, err := p.TryPublishBatch([]string{k0 + "4", k1 + "3"}); n != 0 || err != nil {
		t.Fatalf("TryPublishBatch on a full partition = %d, %v; want 0, nil", n, err)
	}
	p.Partition(1).Close()
	if n, err := p.TryPublishBatch([]string{k1 + "4"}); n != 0 || !errors.Is(err, ErrClosed) {
		t.Fatalf("TryPublishBatch on a closed partition = %d, %v; want 0, ErrClosed", n, err)
	}
	// One partition: the queue's own TryPublishBatch.
	q := NewPartitioned(1, 3, key)
	if n, err := q.TryPublishBatch([]string{"a", "b", "c", "d"}); n != 3 || err != nil {
		t.Fatalf("single-partition TryPublishBatch = %d, %v; want 3, nil", n, err)
	}
}

// Guarantee: when PublishBatchTakenFirst stops early (here a context that
// ends while a partition is full), the items it published are the first n
// of its slice and the others follow, whichever partitions took theirs
// and in whichever window it stopped; PublishBatch leaves its slice as it
// was.
func TestPartitionedPublishBatchTakenFirstPutsPublishedItemsFirst(t *testing.T) {
	keys := make([]string, 3) // keys[i] maps to partition i
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		if i := KeyPartition(k, 3); keys[i] == "" {
			keys[i] = k
		}
	}
	if slices.Contains(keys, "") {
		t.Fatal("test setup: need a key for each partition")
	}
	item := func(part int, n int) string { return fmt.Sprint(keys[part], n) }
	for _, tc := range []struct {
		name  string
		batch []string
		taken int
	}{
		// One window of 6: partition 0 takes both, partition 1 two of
		// three, partition 2 is not reached.
		{"partial partition", []string{item(2, 1), item(1, 1), item(0, 1), item(1, 2), item(1, 3), item(0, 2)}, 4},
		// The first window fits; in the second, partition 0 is full.
		{"second window", []string{item(0, 1), item(1, 1), item(2, 1), item(0, 2), item(1, 2), item(2, 2),
			item(2, 3), item(0, 3), item(1, 3)}, 6},
	} {
		for _, takenFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/takenFirst=%v", tc.name, takenFirst), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					p := NewPartitioned(3, 2, func(s string) string { return s[:1] })
					ctx, cancel := context.WithTimeout(t.Context(), time.Second)
					defer cancel()
					batch := slices.Clone(tc.batch)
					publish := p.PublishBatch
					if takenFirst {
						publish = p.PublishBatchTakenFirst
					}
					n, err := publish(ctx, batch)
					if n != tc.taken || !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("publish = %d, %v; want %d, the context's deadline", n, err, tc.taken)
					}
					var published []string
					buf := make([]string, 8)
					for i := range 3 {
						k, _ := p.Partition(i).TryReceive(buf)
						published = append(published, buf[:k]...)
					}
					if !takenFirst {
						if !slices.Equal(batch, tc.batch) {
							t.Fatalf("PublishBatch reordered its items: %v, was %v", batch, tc.batch)
						}
						return
					}
					got, rest := slices.Clone(batch[:n]), batch[n:]
					slices.Sort(got)
					slices.Sort(published)
					if !slices.Equal(got, published) {
						t.Fatalf("first %d items %v, but %v were published", n, batch[:n], published)
					}
					all := slices.Concat(got, rest)
					slices.Sort(all)
					want := slices.Clone(tc.batch)
					slices.Sort(want)
					if !slices.Equal(all, want) {
						t.Fatalf("items %v after publishing, want a reordering of %v", batch, tc.batch)
					}
				})
			})
		}
	}
}

// Guarantee: PublishBatch with a context already done computes no key and
// publishes nothing.
func TestPartitionedPublishBatchComputesNoKeyOnceCtxIsDone(t *testing.T) {
	keys := 0
	p := NewPartitioned(2, 4, func(s string) string { keys++; return s })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n, err := p.PublishBatch(ctx, []string{"a", "b", "c"})
	if n != 0 || !errors.Is(err, context.Canceled) || keys != 0 || p.Queued() != 0 {
		t.Fatalf("PublishBatch with a done context = %d, %v after %d keys (%d queued); want 0, context.Canceled, no key, nothing queued", n, err, keys, p.Queued())
	}
}

// Guarantee: with one partition a Partitioned is a plain queue: it never
// computes a key (so the key function may be nil), and every publish
// method hands the items to that queue in order.
func TestPartitionedWithOnePartitionComputesNoKey(t *testing.T) {
	keys := 0
	p := NewPartitioned(1, 8, func(int) string { keys++; return "" })
	ctx := context.Background()
	if n, err := p.PublishBatch(ctx, []int{1, 2}); n != 2 || err != nil {
		t.Fatalf("PublishBatch = %d, %v; want 2, nil", n, err)
	}
	progress := -1
	if n, err := p.PublishBatchProgress(ctx, []int{3}, &progress, nil, time.Time{}); n != 1 || err != nil {
		t.Fatalf("PublishBatchProgress = %d, %v; want 1, nil", n, err)
	}
	if n, err := p.PublishBatchTakenFirst(ctx, []int{4}); n != 1 || err != nil {
		t.Fatalf("PublishBatchTakenFirst = %d, %v; want 1, nil", n, err)
	}
	if n, err := p.TryPublishBatch([]int{5, 6}); n != 2 || err != nil {
		t.Fatalf("TryPublishBatch = %d, %v; want 2, nil", n, err)
	}
	if n, err := p.TryPublishBatchProgress([]int{7, 8, 9}, &progress, nil, time.Time{}); n != 2 || err != nil {
		t.Fatalf("TryPublishBatchProgress = %d, %v; want the 2 that fit, nil", n, err)
	}
	if keys != 0 {
		t.Fatalf("a single partition computed %d keys, want none", keys)
	}
	if got := fmt.Sprint(drainAll(t, p.Partition(0))); got != "[1 2 3 4 5 6 7 8]" {
		t.Fatalf("the queue holds %s, want [1 2 3 4 5 6 7 8]", got)
	}
}
