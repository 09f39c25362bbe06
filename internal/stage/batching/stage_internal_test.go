package batching

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/queue"
	"github.com/boulevard-go/boulevard/message"
)

// newTestPartition returns a partition of a batcher with the given batch
// size, driven by hand: messages go in with add, and the emitted batches are
// taken from out with takeBatches.
func newTestPartition(t *testing.T, batchSize int) *partition[int] {
	t.Helper()
	s := New(batcher.Options[int]{
		Name:         "internal",
		BatchSize:    batchSize,
		BatchTimeout: time.Hour,
		Handle:       func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil },
	}.WithDefaults(), Config{Name: t.Name()})
	return &partition[int]{
		s:     s,
		in:    s.input.Partition(0),
		out:   queue.New[message.Batch[int]](4),
		byKey: make(map[string]*open[int]),
	}
}

// takeBatches hands over what b emitted, empties b.out and returns how
// many batches it held.
func takeBatches(t *testing.T, b *partition[int]) int {
	t.Helper()
	// The partition loop hands what it emitted over once per chunk taken
	// in, as this does.
	if !b.handOver(context.Background()) {
		t.Fatal("hand-over failed")
	}
	buf := make([]message.Batch[int], 4)
	n, err := b.out.TryReceive(buf)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Guarantee: a batcher's bookkeeping of open batches stays proportional to
// the number of batches open at once, however many batches it has emitted,
// so a long-running batcher does not grow without bound — also when a slow
// key stays open while a busy key emits batch after batch.
func TestOpenBatchBookkeepingStaysBounded(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run("slowKeyOpen="+strconv.FormatBool(slow), func(t *testing.T) {
			const batches = 10000
			b := newTestPartition(t, 2)
			ctx := context.Background()
			now := time.Now()
			add := func(id int, key string) {
				m := message.New(id, nil, uint64(id))
				m.SetBatchKey(key)
				if !b.add(ctx, m, 0, now) {
					t.Fatal("add failed")
				}
			}
			if slow {
				add(-2, "slow") // stays open: the timeout is an hour away
			}
			add(-1, "busy")
			emitted, maxOrder := 0, 0
			for i := range batches {
				// A steady stream: each chunk of two messages completes the
				// open batch of key busy and opens the next one.
				add(2*i, "busy")
				add(2*i+1, "busy")
				// The partition loop looks for the next deadline after every
				// chunk it receives.
				if b.first() == nil {
					t.Fatal("no open batch, yet one was just opened")
				}
				emitted += takeBatches(t, b)
				maxOrder = max(maxOrder, len(b.order))
			}
			if emitted != batches {
				t.Fatalf("%d batches emitted, want %d", emitted, batches)
			}
			// At most two batches are open at once here; allow generous
			// slack for amortised compaction, but not growth with traffic.
			if maxOrder > 64 {
				t.Errorf("deadline order grew to %d entries for at most 2 open batches after %d batches", maxOrder, batches)
			}
		})
	}
}

// Guarantee: the batches a partition emits while taking in one chunk reach
// the batch processors together and in the order they were emitted; once
// the hard stop has come, the hand-over gives up, and the partition lets
// them go (they stay unacknowledged) rather than hold them.
func TestEmittedBatchesHandedOverTogetherInOrder(t *testing.T) {
	b := newTestPartition(t, 1)
	ctx := context.Background()
	now := time.Now()
	for id := range 3 {
		if !b.add(ctx, message.New(id, nil, uint64(id)), 0, now) {
			t.Fatal("add failed")
		}
	}
	if n := b.out.Len(); n != 0 {
		t.Fatalf("%d batches handed over before the chunk was taken in, want 0", n)
	}
	if !b.handOver(ctx) {
		t.Fatal("hand-over failed")
	}
	buf := make([]message.Batch[int], 4)
	n, err := b.out.TryReceive(buf)
	if err != nil || n != 3 {
		t.Fatalf("took %d batches (%v), want 3", n, err)
	}
	for i, batch := range buf[:n] {
		if got := batch.Messages[0].Data; got != i {
			t.Fatalf("batch %d holds message %d: the emission order is lost", i, got)
		}
	}

	// After the hard stop, a hand-over gives up.
	for id := range 5 {
		b.add(ctx, message.New(id, nil, uint64(id)), 0, now)
	}
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	if b.handOver(stopped) {
		t.Fatal("a hand-over after the hard stop reported success")
	}
	b.leftBehind(stopped, nil)
	if len(b.emitted) != 0 {
		t.Fatalf("%d batches still held once the partition stopped", len(b.emitted))
	}
}

// Guarantee: when the hard stop comes while a hand-over waits for room in
// the batch queue, the partition keeps only the batches it did not hand
// over, for leftBehind to count as unacknowledged: those the batch
// processors took are theirs, and are not counted twice.
func TestAHardStopDuringAHandOverKeepsOnlyTheBatchesNotHandedOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTestPartition(t, 1)
		ctx, cancel := context.WithCancel(context.Background())
		now := time.Now()
		for id := range b.out.Cap() + 2 {
			if !b.add(ctx, message.New(id, nil, uint64(id)), 0, now) {
				t.Fatal("add failed")
			}
		}
		handed := make(chan bool)
		go func() { handed <- b.handOver(ctx) }()
		synctest.Wait() // the queue is full: the hand-over waits
		cancel()
		if <-handed {
			t.Fatal("a hand-over cut short by the hard stop reported success")
		}
		var kept []int
		for _, batch := range b.emitted {
			id := -1 // a batch let go of: handed over
			if len(batch.Messages) > 0 {
				id = batch.Messages[0].Data
			}
			kept = append(kept, id)
		}
		if want := []int{b.out.Cap(), b.out.Cap() + 1}; !slices.Equal(kept, want) {
			t.Errorf("the partition kept the batches of messages %v (-1: one handed over), want only %v, those not handed over", kept, want)
		}
	})
}

// Guarantee: when the hard stop keeps a batch that MaxWeight closed from
// being handed over, the message that closed it still joins the next
// batch: every message the partition took in is in a batch it emitted or
// in an open one, where the partition counts it among those it leaves
// unacknowledged.
func TestMessageThatClosedABatchIsKeptAtTheHardStop(t *testing.T) {
	b := newTestPartition(t, 10)
	b.s.opts.MaxWeight = 3
	b.weigh = func(*message.Message[int]) int { return 2 }
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	now := time.Now()
	// Each message closes the batch of the one before it: the hand-over
	// comes with the batch the last one closes.
	for id := range maxEmitted + 1 {
		m := message.New(id, nil, uint64(id))
		if ok := b.add(stopped, m, 2, now); ok != (id < maxEmitted) {
			t.Fatalf("add of message %d reported %v", id, ok)
		}
	}
	held := 0
	for _, batch := range b.emitted {
		held += len(batch.Messages)
	}
	for _, ob := range b.byKey {
		held += len(ob.msgs)
	}
	if held != maxEmitted+1 {
		t.Fatalf("%d messages in emitted or open batches after the hard stop, want all %d taken in", held, maxEmitted+1)
	}
}
