package kafkatopology

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// holdDue produces n letters (values 0 to n-1) to q's first hold topic,
// all due now, in one produce call: a backlog that fell due together.
func holdDue(t testing.TB, be *Backend[msg], q *queues[msg], n int) {
	t.Helper()
	now := time.Now()
	dues := make([]time.Time, n)
	for i := range dues {
		dues[i] = now
	}
	holdAt(t, be, q, dues...)
}

// holdAt produces a letter for each due time (values 0 to n-1, letter i
// due at dues[i]) to q's first hold topic, in one produce call.
func holdAt(t testing.TB, be *Backend[msg], q *queues[msg], dues ...time.Time) {
	t.Helper()
	msgs := make([]*sarama.ProducerMessage, len(dues))
	for i := range msgs {
		l := topology.Letter[msg]{Value: msg{N: i}}
		var err error
		if msgs[i], err = q.record(context.Background(), q.holds[0].name, &l, 0, q.holdHeaders(dues[i])...); err != nil {
			t.Fatal(err)
		}
	}
	if err := be.prod.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
}

// mainTopicValues reads every record of q's main topic, partition by
// partition, in their order there.
func mainTopicValues(t *testing.T, c *kfake.Cluster, be *Backend[msg], q *queues[msg]) map[int32][]int {
	t.Helper()
	cons, err := sarama.NewConsumer(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ps, err := be.client.Partitions(q.main)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32][]int{}
	for _, p := range ps {
		end, err := be.client.GetOffset(q.main, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		if end == 0 {
			continue
		}
		pc, err := cons.ConsumePartition(q.main, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		for rec := range pc.Messages() {
			var m msg
			if err := json.Unmarshal(rec.Value, &m); err != nil {
				t.Fatal(err)
			}
			out[p] = append(out[p], m.N)
			if rec.Offset+1 >= end {
				break
			}
		}
		if err := pc.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Guarantee: the letters of a hold partition that are due together reach
// their main-topic partition in their hold order.
func TestLettersDueTogetherReachTheirMainPartitionInHoldOrder(t *testing.T) {
	const n = 300
	c := testbroker.Kafka(t)
	be := newBackend(t, c.ListenAddrs())
	q := declare(t, be, topology.New("inorder").Hold(time.Second)).(*queues[msg])
	holdDue(t, be, q, n)
	wait.For(t, "every letter released", func() bool {
		h, ok := holdOf(be, q.holds[0].name, 0)
		return ok && h.Committed == n
	}, holdsState(be))
	got := mainTopicValues(t, c, be, q)[0]
	if len(got) != n {
		t.Fatalf("main topic holds %d letters, want %d", len(got), n)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("main topic letter %d is letter %d of the hold, want the hold's order: %v", i, v, got)
		}
	}
}

// Guarantee: when the produce of letters released together fails for some
// of them, the hold partition is marked for commit up to the first letter
// not acknowledged and no further while it fails, and once it is produced
// every letter is on the main topic exactly once.
func TestAReleaseThatFailsForSomeLettersMarksNothingPastTheFirstAndReleasesEachOnce(t *testing.T) {
	const n, victim = 300, 150
	c := testbroker.Kafka(t)
	be := newBackend(t, c.ListenAddrs())
	q := declare(t, be, topology.New("partly").Hold(time.Second)).(*queues[msg])
	hold := q.holds[0].name
	// Every produce to the main topic that carries the victim's record is
	// refused, the records it carries with it too, until failing ends.
	var failing atomic.Bool
	failing.Store(true)
	mark := fmt.Appendf(nil, `"n":%d}`, victim)
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		carries := false
		for _, tp := range req.Topics {
			for _, p := range tp.Partitions {
				carries = carries || tp.Topic == q.main && bytes.Contains(p.Records, mark)
			}
		}
		if !carries || !failing.Load() {
			return nil, nil, false
		}
		return testbroker.Refusal(req, kerr.MessageTooLarge.Code), nil, true
	})
	holdDue(t, be, q, n)
	wait.For(t, "the release stalled at the refused letter", func() bool {
		st := be.Stats().Stalled
		return len(st) == 1 && st[0].Offset == victim
	}, holdsState(be), func() string { return fmt.Sprintf("Stalled = %+v", be.Stats().Stalled) })
	// The group's commits follow its marks (every 100ms here): the first
	// one at the refused letter's offset or past it is where the marking
	// stopped.
	committed := func() int64 {
		resp, err := be.admin.ListConsumerGroupOffsets(hold+":release", map[string][]int32{hold: {0}})
		if err != nil {
			t.Fatal(err)
		}
		if blk := resp.GetBlock(hold, 0); blk != nil {
			return blk.Offset
		}
		return -1
	}
	var at int64
	wait.For(t, "the group committed up to the refused letter", func() bool { at = committed(); return at >= victim })
	if at != victim {
		t.Errorf("hold partition committed at %d while the letter at offset %d is not released, want %d", at, victim, victim)
	}
	if h, _ := holdOf(be, hold, 0); h.Committed != victim {
		t.Errorf("Stats: hold partition committed at %d while the letter at offset %d is not released, want %d", h.Committed, victim, victim)
	}
	failing.Store(false)
	wait.For(t, "every letter released", func() bool {
		h, ok := holdOf(be, hold, 0)
		return ok && h.Committed == n
	}, holdsState(be))
	seen := map[int]int{}
	for _, v := range mainTopicValues(t, c, be, q)[0] {
		seen[v]++
	}
	for i := range n {
		if seen[i] != 1 {
			t.Errorf("letter %d is on the main topic %d times, want once", i, seen[i])
		}
	}
	if len(seen) != n {
		t.Errorf("main topic holds %d distinct letters, want %d", len(seen), n)
	}
}

// Guarantee: a letter fetched behind letters that are due is not released
// with them before its own due time, and the letters behind it wait for
// it: the releaser releases the due letters before it, marks the hold
// partition up to it, and no further.
func TestALetterFetchedBehindDueOnesWaitsForItsOwnDueTime(t *testing.T) {
	c := testbroker.Kafka(t)
	be := newBackend(t, c.ListenAddrs())
	q := declare(t, be, topology.New("notyet").Hold(time.Second)).(*queues[msg])
	hold := q.holds[0].name
	now := time.Now()
	holdAt(t, be, q, now, now, now.Add(time.Hour), now)
	wait.For(t, "the letters due before the one not due released", func() bool {
		h, ok := holdOf(be, hold, 0)
		return ok && h.Committed >= 2
	}, holdsState(be))
	if got := mainTopicValues(t, c, be, q)[0]; !slices.Equal(got, []int{0, 1}) {
		t.Errorf("main topic holds %v, want [0 1]: letter 2 is due in an hour and letter 3 is behind it", got)
	}
	if h, _ := holdOf(be, hold, 0); h.Committed != 2 {
		t.Errorf("hold partition committed at %d, want 2: the letter at offset 2 is not due", h.Committed)
	}
}

// Guarantee: the due letters of a hold partition that the releaser fetched
// together go back to their main topic together, in a few produce
// requests, not one request per letter.
func TestDueLettersFetchedTogetherAreReleasedInFewProduceRequests(t *testing.T) {
	const n = 200
	c := testbroker.Kafka(t)
	be := newBackend(t, c.ListenAddrs())
	q := declare(t, be, topology.New("fewreqs").Hold(time.Second)).(*queues[msg])
	var requests atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, tp := range kr.(*kmsg.ProduceRequest).Topics {
			if tp.Topic == q.main {
				requests.Add(1)
				break
			}
		}
		return nil, nil, false
	})
	holdDue(t, be, q, n)
	wait.For(t, "every letter released", func() bool {
		h, ok := holdOf(be, q.holds[0].name, 0)
		return ok && h.Committed == n
	}, holdsState(be))
	if got := requests.Load(); got > n/10 {
		t.Fatalf("%d due letters released in %d produce requests, want at most %d", n, got, n/10)
	}
}

// Guarantee: a hold partition stalled by a letter that could not be
// released when its claim ended (the group rebalanced) is no longer
// reported stalled once the partition's next claim releases its letters,
// all acknowledged together.
func TestAReleaseStallEndsOnceALaterBatchIsReleasedWhole(t *testing.T) {
	const n = 3
	c := testbroker.Kafka(t)
	be := newBackend(t, c.ListenAddrs(), func(o *Options[msg]) { o.Config.Metadata.RefreshFrequency = 100 * time.Millisecond })
	q := declare(t, be, topology.New("stallends").Hold(time.Second)).(*queues[msg])
	hold := q.holds[0].name
	// Every produce to the main topic is refused until the releaser
	// joins its group again, its claim on the stalled partition ended.
	var failing, rejoining atomic.Bool
	failing.Store(true)
	c.ControlKey(int16(kmsg.JoinGroup), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if kr.(*kmsg.JoinGroupRequest).Group == hold+":release" && rejoining.Load() {
			failing.Store(false)
		}
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		for _, tp := range req.Topics {
			if tp.Topic == q.main && failing.Load() {
				return testbroker.Refusal(req, kerr.NotEnoughReplicas.Code), nil, true
			}
		}
		return nil, nil, false
	})
	holdDue(t, be, q, n)
	wait.For(t, "the release stalled", func() bool {
		st := be.Stats().Stalled
		return len(st) == 1 && st[0].Failures >= 2
	}, holdsState(be), func() string { return fmt.Sprintf("Stalled = %+v", be.Stats().Stalled) })
	// A partition added to the hold topic makes the releaser's group
	// rebalance: its claim on partition 0 ends while the letter fails,
	// and the next session claims it again.
	rejoining.Store(true)
	if err := testbroker.Admin(t, c.ListenAddrs()).CreatePartitions(hold, 2, nil, false); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "every letter released", func() bool {
		h, ok := holdOf(be, hold, 0)
		return ok && h.Committed == n
	}, holdsState(be))
	if failing.Load() {
		t.Fatal("the letters were released before the releaser joined its group again")
	}
	wait.Within(t, 2*time.Second, "the stall to end", func() bool { return len(be.Stats().Stalled) == 0 },
		func() string { return fmt.Sprintf("Stalled = %+v", be.Stats().Stalled) })
}
