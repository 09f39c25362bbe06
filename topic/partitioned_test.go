package topic

import (
	"context"
	"errors"
	"hash/fnv"
	"testing"
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
	if !errors.Is(err, ErrTopicClosed) || n > 1 {
		t.Fatalf("PublishBatch with partition 0 closed = %d, %v; want at most 1, ErrTopicClosed", n, err)
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
