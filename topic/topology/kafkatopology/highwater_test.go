package kafkatopology

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// fullReader sets a backend's options so that its readers' buffers hold
// one letter: a reader whose handler blocks stops fetching soon.
func fullReader(o *Options[msg]) {
	o.ReadAhead = 1
	o.Config.ChannelBufferSize = 1
	o.HighWaterInterval = 50 * time.Millisecond
}

// publish publishes n letters to q.
func publish(t *testing.T, q topology.Queues[msg], n int) {
	t.Helper()
	for i := range n {
		if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: i}}); err != nil {
			t.Fatal(err)
		}
	}
}

// lagCountsPublishedWhileFull publishes letters to q, whose reader r
// holds the first it received unsettled (a handler that blocks) and has
// its buffer full, then as many again, and waits for b's Stats to count
// them all in the partition's high-water mark and lag.
func lagCountsPublishedWhileFull(t *testing.T, b *Backend[msg], q topology.Queues[msg], r topology.Reader[msg]) {
	t.Helper()
	kname := q.(*queues[msg]).main
	const first, later = 8, 8
	publish(t, q, first)
	receiveOne(t, r) // never settled
	state := func() string { return fmt.Sprintf("Stats().Partitions = %+v", b.Stats().Partitions) }
	wait.For(t, "the first letters counted", func() bool {
		ps, ok := partitionOf(b, kname)
		return ok && ps.HighWater == first
	}, state)
	publish(t, q, later)
	wait.For(t, "the letters published while the reader's buffer is full counted in its lag", func() bool {
		ps, ok := partitionOf(b, kname)
		return ok && ps.HighWater == first+later && ps.Lag == first+later-ps.Committed
	}, state)
}

// Guarantee: a group reader whose handler blocks, its buffer full, no
// longer fetches; the letters published to its partitions meanwhile
// still count in Stats' HighWater and Lag, within
// Options.HighWaterInterval.
func TestLagCountsLettersPublishedWhileAReadersBufferIsFull(t *testing.T) {
	b := newLoggedBackend(t, testbroker.Kafka(t).ListenAddrs(), io.Discard, fullReader)
	q := declare(t, b, topology.New("stuck"))
	lagCountsPublishedWhileFull(t, b, q, subscribe(t, q))
}

// Guarantee: as for a group reader, a broadcast reader whose buffer is
// full counts in its Lag the letters published since it stopped
// fetching.
func TestBroadcastLagCountsLettersPublishedWhileAReadersBufferIsFull(t *testing.T) {
	b := newLoggedBackend(t, testbroker.Kafka(t).ListenAddrs(), io.Discard, fullReader)
	q := declare(t, b, topology.New("stuck-news").Broadcast())
	lagCountsPublishedWhileFull(t, b, q, subscribe(t, q))
}

// Guarantee: the letters another process holds in a hold partition while
// this backend's releaser has paused it (its next letter not due) count
// in the partition's Waiting, within Options.HighWaterInterval.
func TestWaitingCountsLettersOthersHoldWhileAHoldPartitionIsPaused(t *testing.T) {
	c := testbroker.Kafka(t)
	tb := topology.New("paused-hold").Hold(time.Hour)
	other := newLoggedBackend(t, c.ListenAddrs(), io.Discard, fullReader)
	oq := declare(t, other, tb)
	hold := oq.(*queues[msg]).holds[0].name
	// The other process holds letters and releases none: its releaser
	// leaves the group, this backend's claims the partition.
	other.mu.Lock()
	rel := other.releasers[hold]
	other.mu.Unlock()
	<-rel.shut()
	b := newLoggedBackend(t, c.ListenAddrs(), io.Discard, fullReader)
	declare(t, b, tb)
	hold1 := func(n int) {
		for i := range n {
			if err := oq.Hold(t.Context(), 0, topology.Letter[msg]{Value: msg{N: i}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	hold1(1)
	wait.For(t, "the first held letter fetched, waiting, and its partition paused", func() bool {
		h, ok := holdOf(b, hold, 0)
		return ok && h.Next == 1 && h.Waiting == 1 && b.pauses.Load() > 0
	}, holdsState(b))
	// A fetch under way as the partition paused may still bring the
	// next letter; none follows it.
	hold1(1)
	wait.For(t, "the second held letter counted as waiting", func() bool {
		h, ok := holdOf(b, hold, 0)
		return ok && h.HighWater == 2 && h.Waiting == 2
	}, holdsState(b))
	hold1(2)
	wait.For(t, "the letters held while the partition is paused counted as waiting", func() bool {
		h, ok := holdOf(b, hold, 0)
		return ok && h.HighWater == 4 && h.Waiting == 4
	}, holdsState(b))
}

// listedBackend starts a cluster and a backend on it with a reader of
// queue name, publishes a letter and waits for the backend to list the
// partition's log end.
func listedBackend(t *testing.T, name string) (*kfake.Cluster, *Backend[msg]) {
	t.Helper()
	c := testbroker.Kafka(t)
	b := newLoggedBackend(t, c.ListenAddrs(), io.Discard, fullReader)
	q := declare(t, b, topology.New(name))
	kname := q.(*queues[msg]).main
	subscribe(t, q)
	publish(t, q, 1)
	wait.For(t, "the partition's log end listed", func() bool { return b.ends.End(kname, 0) == 1 })
	return c, b
}

// Guarantee: the backend's listing of its partitions' log ends stops
// with its Close, which returns by its deadline while a listing waits for
// a cluster that stopped answering; no goroutine of it is left.
func TestCloseEndsTheListingOfLogEnds(t *testing.T) {
	before := goleak.IgnoreCurrent()
	c, b := listedBackend(t, "listed")
	testbroker.HangKafka(t, c)
	if !testbroker.ReturnsByDeadline(t, "closing the backend", b.Close) {
		t.FailNow()
	}
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.HungGrace)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatalf("the backend's closing, cut short at its deadline, still runs: %v", err)
	}
	goleak.VerifyNone(t, append(hungCluster(), before)...)
}

// Guarantee: Close does not wait for a listing of the partitions' log
// ends that the cluster leaves unanswered: the listing is cut short as
// the closing begins, so Close returns nil long before its deadline, and
// no goroutine of it is left.
func TestCloseDoesNotWaitForAnUnansweredListingOfLogEnds(t *testing.T) {
	before := goleak.IgnoreCurrent()
	c, b := listedBackend(t, "unanswered")
	<-testbroker.HangKafkaKey(t, c, kmsg.ListOffsets)
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.HungGrace)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatalf("Close while a listing of the log ends waits for the cluster = %v, want nil before its %v deadline", err, testbroker.HungGrace)
	}
	goleak.VerifyNone(t, append(hungCluster(), before)...)
}
