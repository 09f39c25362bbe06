package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Partitioned is a set of queues, one per partition, that routes each item to
// the queue its key selects, so that items with the same key always reach the
// same receiver in the order they were published. Pipelines use it for
// PartitionBy.
type Partitioned[T any] struct {
	queues  []*Queue[T]
	key     func(T) string
	window  int       // items PublishBatch partitions at a time: what the queues hold together
	scratch sync.Pool // *[][]T
}

// NewPartitioned returns n queues of the given capacity and routes by key.
// With one partition it is a plain queue: key is never called, and may be
// nil. It panics if n < 1 or capacity < 1.
func NewPartitioned[T any](n, capacity int, key func(T) string) *Partitioned[T] {
	if n < 1 {
		panic("queue: NewPartitioned needs at least one partition")
	}
	p := &Partitioned[T]{key: key, window: n * capacity}
	for range n {
		p.queues = append(p.queues, New[T](capacity))
	}
	return p
}

// Partition returns the queue of partition i.
func (p *Partitioned[T]) Partition(i int) *Queue[T] { return p.queues[i] }

// Len reports how many partitions there are.
func (p *Partitioned[T]) Len() int { return len(p.queues) }

// PublishBatch publishes every item to the partition its key selects,
// keeping the order of items within a partition. It blocks while a selected
// queue is full and returns how many items were published, with ctx.Err() or
// ErrClosed when it stopped early (items for other partitions may then
// be published or not).
//
// It takes items a window at a time, as many as the queues hold together:
// the keys of a window are computed, its items published, then the next
// window is taken. So its scratch memory is bounded by the queues'
// capacity whatever len(items), and once ctx is done it computes no more
// keys: a large batch returns soon after ctx ends (the window under way is
// finished first), not only once every key has been computed.
func (p *Partitioned[T]) PublishBatch(ctx context.Context, items []T) (int, error) {
	return p.publishBatch(ctx, items, false, nil, nil, time.Time{})
}

// PublishBatchProgress is PublishBatch for a caller that must know, when
// the key function ends the goroutine (runtime.Goexit, which no recover
// catches), which items were published: before each window's keys are
// computed it sets *progress to how many items it has published, and
// those are items[:*progress] (it computes a window's keys before it
// publishes any of its items, and takes the next window only once the
// queues took every item of the one before). So the caller's deferred
// code can tell the items no queue took, items[*progress:], without the
// items being touched. The cost is one store a window.
//
// keying, when not nil, dates the key function's calls for a reader on
// another goroutine: while a window's keys are computed it holds when
// that began, as the time since epoch in nanoseconds plus 1, and 0
// otherwise; two stores and one monotonic clock reading a window, none with one
// partition, where no key is computed. A key function that ends the
// goroutine leaves it set: the caller's deferred code clears it.
func (p *Partitioned[T]) PublishBatchProgress(ctx context.Context, items []T, progress *int, keying *atomic.Int64, epoch time.Time) (int, error) {
	return p.publishBatch(ctx, items, false, progress, keying, epoch)
}

// PublishBatchTakenFirst is PublishBatch, except that when it stops early
// it reorders items so that the n items it published come first,
// items[:n], and those it did not publish after them, each keeping its
// order within its partition: the caller can tell which items were
// taken. It reorders nothing when it publishes every item, and costs
// nothing more than PublishBatch then. The caller must own items.
//
// When the key function ends the goroutine (runtime.Goexit, which no
// recover catches), PublishBatchTakenFirst sets the items it published to
// the zero value before the goroutine ends (they are a prefix of items:
// it computes a window's keys before it publishes any of its items), so
// that the caller's deferred code can tell the items it did not publish,
// those left as they were. It reorders nothing then.
func (p *Partitioned[T]) PublishBatchTakenFirst(ctx context.Context, items []T) (int, error) {
	return p.publishBatch(ctx, items, true, nil, nil, time.Time{})
}

func (p *Partitioned[T]) publishBatch(ctx context.Context, items []T, takenFirst bool, progress *int, keying *atomic.Int64, epoch time.Time) (int, error) {
	if len(p.queues) == 1 {
		return p.queues[0].PublishBatch(ctx, items)
	}
	sp, _ := p.scratch.Get().(*[][]T)
	if sp == nil {
		parts := make([][]T, len(p.queues))
		sp = &parts
	}
	parts := *sp
	done := ctx.Done()
	total := 0
	var err error
	// Once per call, not per item: the key function may end the
	// goroutine (runtime.Goexit) while a window is partitioned, before
	// any of its items is published.
	returned := false
	defer func() {
		if returned {
			return
		}
		for i, part := range parts {
			clear(part)
			parts[i] = part[:0]
		}
		p.scratch.Put(sp)
		if takenFirst {
			clear(items[:total])
		}
	}()
	for start := 0; start < len(items) && err == nil; start += p.window {
		if IsDone(done) {
			err = ctx.Err()
			break
		}
		if progress != nil {
			*progress = total
		}
		total, err = p.publishWindow(ctx, parts, items[start:min(start+p.window, len(items))], total, takenFirst, keying, epoch)
	}
	returned = true
	p.scratch.Put(sp)
	return total, err
}

// publishWindow publishes items (at most a window) through the scratch
// slices parts, which it leaves empty, and returns total plus how many it
// published. With takenFirst, when it stops early it puts the items it
// published at the front of items. keying, when not nil, dates the key
// computation (see PublishBatchProgress).
func (p *Partitioned[T]) publishWindow(ctx context.Context, parts [][]T, items []T, total int, takenFirst bool, keying *atomic.Int64, epoch time.Time) (int, error) {
	if keying != nil {
		keying.Store(since(epoch))
	}
	// Items come in runs of one key (a source's partition): hash a key only
	// when it differs from the previous item's.
	var last string
	i := -1
	for _, it := range items {
		if k := p.key(it); i < 0 || k != last {
			last, i = k, KeyPartition(k, len(parts))
		}
		parts[i] = append(parts[i], it)
	}
	if keying != nil {
		keying.Store(0)
	}
	var err error
	for i, part := range parts {
		if len(part) > 0 {
			var n int
			n, err = p.queues[i].PublishBatch(ctx, part)
			total += n
			if err != nil {
				if takenFirst {
					// The partitions before i took all their
					// items, partition i its first n, the
					// others none: in that order, items'
					// first n are those published.
					k := 0
					for _, q := range parts {
						k += copy(items[k:], q)
					}
				}
				break
			}
		}
	}
	for i, part := range parts {
		clear(part)
		parts[i] = part[:0]
	}
	return total, err
}

// TryPublishBatch publishes, without blocking, the longest prefix of items
// whose partitions have room, keeping the order of items within a
// partition, and returns its length. It stops at the first item its
// partition cannot take (so no item passes an earlier one that stayed
// behind), and returns ErrClosed when that partition is closed.
func (p *Partitioned[T]) TryPublishBatch(items []T) (int, error) {
	return p.tryPublishBatch(items, nil)
}

// TryPublishBatchProgress is TryPublishBatch for a caller that must know,
// when the key function ends the goroutine (runtime.Goexit), which items
// were published: before each call of the key function it sets *progress
// to how many items it has published, items[:*progress], as
// PublishBatchProgress does. The cost is one store a run of items with
// the same key.
//
// keying, when not nil, holds while it runs when it began, as the time
// since epoch in nanoseconds plus 1, and 0 once it returned: it dates the key
// function's calls as PublishBatchProgress does, two stores and one
// monotonic clock reading a call (none with one partition).
func (p *Partitioned[T]) TryPublishBatchProgress(items []T, progress *int, keying *atomic.Int64, epoch time.Time) (int, error) {
	if keying == nil || len(p.queues) == 1 {
		return p.tryPublishBatch(items, progress)
	}
	keying.Store(since(epoch))
	n, err := p.tryPublishBatch(items, progress)
	keying.Store(0)
	return n, err
}

// since is the time from epoch to now in nanoseconds, plus 1: a reading
// of the monotonic clock that is never 0, which keying keeps for no
// computation under way.
func since(epoch time.Time) int64 { return int64(time.Since(epoch)) + 1 }

func (p *Partitioned[T]) tryPublishBatch(items []T, progress *int) (int, error) {
	if len(p.queues) == 1 {
		return p.queues[0].TryPublishBatch(items)
	}
	// One run of items with the same key goes to its queue at once; each
	// item's key is computed once.
	total := 0
	k := ""
	if progress != nil {
		*progress = 0
	}
	if len(items) > 0 {
		k = p.key(items[0])
	}
	for total < len(items) {
		if progress != nil {
			*progress = total
		}
		end, next := total+1, ""
		for ; end < len(items); end++ {
			if next = p.key(items[end]); next != k {
				break
			}
		}
		n, err := p.queues[KeyPartition(k, len(p.queues))].TryPublishBatch(items[total:end])
		total += n
		if err != nil || total < end {
			return total, err
		}
		k = next
	}
	return total, nil
}

// Close closes every partition.
func (p *Partitioned[T]) Close() {
	for _, q := range p.queues {
		q.Close()
	}
}

// Queued reports how many items wait in all partitions together.
func (p *Partitioned[T]) Queued() int {
	n := 0
	for _, q := range p.queues {
		n += q.Len()
	}
	return n
}

// KeyPartition maps key to one of n partitions with FNV-1a: the same key
// always maps to the same partition for the same n.
func KeyPartition(key string, n int) int {
	if n <= 1 {
		return 0
	}
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime64
	}
	return int(h % uint64(n))
}
