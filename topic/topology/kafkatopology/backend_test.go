package kafkatopology

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
	"github.com/boulevard-go/boulevard/validate"
)

type msg = topologytest.Msg

func declare(t *testing.T, b *Backend[msg], tb *topology.Builder) topology.Queues[msg] {
	t.Helper()
	top, err := tb.Build()
	if err != nil {
		t.Fatal(err)
	}
	q, err := b.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func subscribe(t *testing.T, q topology.Queues[msg]) topology.Reader[msg] {
	t.Helper()
	r, err := q.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "a reader", r.Close) })
	return r
}

// receiveOne waits for one letter.
func receiveOne(t *testing.T, r topology.Reader[msg]) topology.Letter[msg] {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	buf := make([]topology.Letter[msg], 1)
	if _, err := r.Receive(ctx, buf); err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return buf[0]
}

// Guarantee: a letter held when its backend closes stays in the hold topic
// and, once the topology is declared again by a new backend, is delivered
// to its group when due (not before), with its history.
func TestHeldAcrossRestartDeliveredWhenDue(t *testing.T) {
	brokers := testbroker.Kafka(t).ListenAddrs()
	tb := topology.New("settle").Hold(2 * time.Second).DLQ()
	b1 := newBackend(t, brokers)
	q1 := declare(t, b1, tb)
	r1 := subscribe(t, q1)
	if err := q1.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 1}}); err != nil {
		t.Fatal(err)
	}
	l := receiveOne(t, r1)
	failed := time.Now().Add(-time.Minute).Round(0)
	l.Retries, l.FirstFailure, l.LastFailure = 1, failed, failed
	held := time.Now()
	if err := q1.Hold(t.Context(), 0, l); err != nil {
		t.Fatal(err)
	}
	if err := r1.Settle(t.Context(), &l); err != nil {
		t.Fatal(err)
	}
	topologytest.MustClose(t, "the first backend", b1.Close)

	b2 := newBackend(t, brokers)
	r2 := subscribe(t, declare(t, b2, tb))
	got := receiveOne(t, r2)
	if since := time.Since(held); since < 2*time.Second {
		t.Errorf("delivered %s after it was held, before its 2s hold", since)
	}
	if got.Value.N != 1 || got.Retries != 1 || !got.FirstFailure.Equal(failed) || !got.LastFailure.Equal(failed) {
		t.Errorf("delivered %+v, want message 1 with retry count 1 and its failure times", got)
	}
}

// Guarantee: while the head of a hold partition is not due, the releaser
// pauses the partition: it is not fetched again until the letter is
// released (no polling of the broker while it waits).
func TestReleaserPausesUntilDue(t *testing.T) {
	c := testbroker.Kafka(t)
	var be atomic.Pointer[Backend[msg]]
	var fetches atomic.Int64
	const holdTopic = "idle-hold-2s"
	c.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b := be.Load()
		if b == nil || b.pauses.Load() == b.resumes.Load() {
			return nil, nil, false // not paused: fetches are expected
		}
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			if tp.Topic == holdTopic {
				fetches.Add(1)
			}
		}
		return nil, nil, false
	})
	b := newBackend(t, c.ListenAddrs())
	be.Store(b)
	q := declare(t, b, topology.New("idle").Hold(2*time.Second))
	r := subscribe(t, q)
	held := time.Now()
	if err := q.Hold(t.Context(), 0, topology.Letter[msg]{Value: msg{N: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := receiveOne(t, r); got.Value.N != 1 {
		t.Fatalf("released %+v", got)
	}
	if b.pauses.Load() != 1 {
		t.Fatalf("the releaser paused %d times, want 1", b.pauses.Load())
	}
	if since := time.Since(held); since < 2*time.Second {
		t.Errorf("released %s after it was held, before its 2s hold", since)
	}
	// One fetch may have been on its way when the partition was paused.
	if n := fetches.Load(); n > 1 {
		t.Errorf("the hold topic was fetched %d times while the partition was paused (for about 2s)", n)
	}
}

// Guarantee: a record released from a hold topic is committed there only
// after its release was acknowledged: a releaser stopped before the due
// time (a crash) leaves it to the next one, which releases it exactly once.
func TestReleaseCommitsAfterAck(t *testing.T) {
	brokers := testbroker.Kafka(t).ListenAddrs()
	tb := topology.New("once").Hold(time.Second)
	b1 := newBackend(t, brokers)
	q1 := declare(t, b1, tb)
	if err := q1.Hold(t.Context(), 0, topology.Letter[msg]{Value: msg{N: 1}}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the releaser to hold the record", func() bool { return b1.pauses.Load() == 1 })
	topologytest.MustClose(t, "the first backend, crashing", b1.crash)
	b2 := newBackend(t, brokers)
	q2 := declare(t, b2, tb)
	r := subscribe(t, q2)
	got := receiveOne(t, r)
	if got.Value.N != 1 {
		t.Fatalf("released %+v", got)
	}
	if err := r.Settle(t.Context(), &got); err != nil {
		t.Fatal(err)
	}
	// The released record was committed: a third backend's releaser
	// releases nothing more.
	wait.For(t, "the release committed", func() bool {
		resp, err := b2.admin.ListConsumerGroupOffsets("once-hold-1s:release", map[string][]int32{"once-hold-1s": {0}})
		return err == nil && resp.GetBlock("once-hold-1s", 0) != nil && resp.GetBlock("once-hold-1s", 0).Offset == 1
	})
	topologytest.MustClose(t, "the second backend", b2.Close)
	b3 := newBackend(t, brokers)
	q3 := declare(t, b3, tb)
	if err := q3.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 2}}); err != nil {
		t.Fatal(err)
	}
	r3 := subscribe(t, q3)
	if got := receiveOne(t, r3); got.Value.N != 2 {
		t.Errorf("after the restart the group received %+v first, want the new message 2 (message 1 released twice?)", got)
	}
}

// Guarantee: invalid options are refused with errors naming each field.
func TestOptionsValidate(t *testing.T) {
	_, err := New(Options[msg]{Partitions: -1})
	var verrs validate.Errors
	if !errors.As(err, &verrs) {
		t.Fatalf("New: %v, want validate.Errors", err)
	}
	for _, want := range []string{"kafkatopology.brokers", "kafkatopology.codec", "kafkatopology.partitions"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := New(Options[msg]{Brokers: []string{"127.0.0.1:1"}, Codec: topic.JSONCodec[msg]{}, AdminTimeout: -1}); err == nil ||
		!strings.Contains(err.Error(), "kafkatopology.adminTimeout") {
		t.Errorf("New with a negative admin timeout: %v", err)
	}
}

// Guarantee: a consumer group starts where the main topic's log ended when
// its topology was first declared: it receives everything published after
// Declare returned, even before its first consumer joined, and nothing
// published before (as the in-memory backend, whose group queue is created
// by Declare).
func TestNewGroupStartsAtDeclare(t *testing.T) {
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs())
	first := declare(t, b, topology.New("orders"))
	if err := first.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 1}}); err != nil {
		t.Fatal(err)
	}
	audit := declare(t, b, topology.New("orders").ForConsumerGroup("audit"))
	if err := first.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 2}}); err != nil {
		t.Fatal(err)
	}
	if got := receiveOne(t, subscribe(t, audit)); got.Value.N != 2 {
		t.Errorf("the audit group, declared between two publishes, received message %d first, want 2", got.Value.N)
	}
	if got := receiveOne(t, subscribe(t, first)); got.Value.N != 1 {
		t.Errorf("the first group received message %d first, want 1", got.Value.N)
	}
}

// Guarantee: a sequenced topology's main topic has one partition per
// routing shard, and a letter goes to its shard's partition, on publish
// and again when its hold releases it, so a key's letters stay on one
// partition (and with one member of the group).
func TestSequencedShardsArePartitions(t *testing.T) {
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs())
	q := declare(t, b, topology.New("ledger").Sequenced(topology.Skip).RoutingShards(4).Hold(time.Second).DLQ())
	parts, err := b.client.Partitions("ledger")
	if err != nil || len(parts) != 4 {
		t.Fatalf("main topic partitions %v, %v; want 4", parts, err)
	}
	pub, err := topology.NewPublisher(q, topology.PublisherOptions[msg]{Key: func(m msg) string { return m.Key }})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, k := range keys {
		if err := pub.Publish(t.Context(), msg{Key: k, N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	r := subscribe(t, q)
	partOf := func(l topology.Letter[msg]) int32 { return l.Receipt.(*receipt).c.part }
	seen := map[int]bool{}
	for range keys {
		l := receiveOne(t, r)
		seen[l.Shard] = true
		if want := topology.ShardOf(l.Key, 4); l.Shard != want || partOf(l) != int32(want) {
			t.Errorf("key %q (shard %d) came with shard %d from partition %d", l.Key, want, l.Shard, partOf(l))
		}
		if l.Key == "a" || l.Key == "b" {
			if err := q.Hold(t.Context(), 0, l); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Settle(t.Context(), &l); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) < 2 {
		t.Fatalf("all keys hashed to shards %v: the test checks nothing", seen)
	}
	for range 2 {
		l := receiveOne(t, r)
		if l.Shard != topology.ShardOf(l.Key, 4) || partOf(l) != int32(l.Shard) {
			t.Errorf("released key %q (shard %d) came from partition %d", l.Key, l.Shard, partOf(l))
		}
	}
}

// Guarantee: a record sent back to one group (a requeue, a released
// retry) reaches neither the other groups of the main topic nor its
// broadcast consumers.
func TestTargetedRecordsReachTheirGroupOnly(t *testing.T) {
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs())
	owner := declare(t, b, topology.New("ticks").ForConsumerGroup("owner"))
	other := declare(t, b, topology.New("ticks").ForConsumerGroup("other"))
	bq := declare(t, b, topology.New("ticks").Broadcast())
	rb := subscribe(t, bq)
	if err := owner.Requeue(t.Context(), topology.Letter[msg]{Value: msg{N: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := owner.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 2}}); err != nil {
		t.Fatal(err)
	}
	if got := receiveOne(t, subscribe(t, owner)); got.Value.N != 1 {
		t.Errorf("the owner group received message %d first, want its requeued 1", got.Value.N)
	}
	if got := receiveOne(t, subscribe(t, other)); got.Value.N != 2 {
		t.Errorf("another group received message %d first, want 2 (1 was requeued for the owner)", got.Value.N)
	}
	if got := receiveOne(t, rb); got.Value.N != 2 {
		t.Errorf("a broadcast consumer received message %d first, want 2 (1 was requeued for the owner)", got.Value.N)
	}
}

// Guarantee: when the group moves a partition to a new member, the member
// losing it waits (up to RevokeTimeout) for the letters of it in flight to
// be settled and commits them before letting go, so the next owner does
// not deliver them again.
func TestRebalanceWaitsForLettersInFlight(t *testing.T) {
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs())
	q := declare(t, b, topology.New("moving"))
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 1}}); err != nil {
		t.Fatal(err)
	}
	r1 := subscribe(t, q)
	l := receiveOne(t, r1)
	r2 := subscribe(t, q) // joins the group: the partition is reassigned
	g1 := r1.(*groupReader[msg])
	wait.For(t, "the first member to wait for its letter in flight", func() bool {
		g1.mu.Lock()
		defer g1.mu.Unlock()
		return g1.waiting == 1
	})
	if err := r1.Settle(t.Context(), &l); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 2}}); err != nil {
		t.Fatal(err)
	}
	buf := make([]topology.Letter[msg], 1)
	var got []int
	wait.For(t, "message 2 at the partition's owner", func() bool {
		for _, r := range []topology.Reader[msg]{r1, r2} {
			if n, err := r.TryReceive(t.Context(), buf); err == nil && n == 1 {
				got = append(got, buf[0].Value.N)
			}
		}
		return len(got) > 0
	})
	if got[0] != 2 {
		t.Errorf("after the rebalance the group received %v, want message 2 only (1 was settled before the move)", got)
	}
}

// Guarantee: a member whose partition the group moves while a letter of
// it is still unsettled when RevokeTimeout runs out lets it go with one
// WARN line naming the partition and how many letters it held, and the
// group delivers the letter again.
func TestRebalancePastRevokeTimeoutSaysSoAndRedelivers(t *testing.T) {
	var logs logtest.Lines
	b := newLoggedBackend(t, testbroker.Kafka(t).ListenAddrs(), &logs,
		func(o *Options[msg]) { o.RevokeTimeout = 200 * time.Millisecond })
	q := declare(t, b, topology.New("let-go"))
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 1}}); err != nil {
		t.Fatal(err)
	}
	r1 := subscribe(t, q)
	receiveOne(t, r1)     // never settled
	r2 := subscribe(t, q) // joins the group: the partition is reassigned
	wait.For(t, "the WARN line of the partition let go", func() bool {
		return logs.Count(ReleasedHeldLog) > 0
	})
	logs.Want(t, 1, "lines saying the partition was released with a letter unsettled",
		"level=WARN", ReleasedHeldLog, "held=1", "partition=0", "revoke_timeout=200ms")
	buf := make([]topology.Letter[msg], 1)
	var got []int
	wait.For(t, "message 1 delivered again", func() bool {
		for _, r := range []topology.Reader[msg]{r1, r2} {
			if n, err := r.TryReceive(t.Context(), buf); err == nil && n == 1 {
				got = append(got, buf[0].Value.N)
			}
		}
		return len(got) > 0
	})
	if got[0] != 1 {
		t.Errorf("after the rebalance the group received %v, want message 1 again", got)
	}
}

// Guarantee: every group session of a reader is logged at INFO, once as
// it starts (naming the partitions it claims) and once as it ends, so a
// rebalance shows in the log as the Kafka source's do.
func TestGroupSessionsAreLoggedAtInfo(t *testing.T) {
	var logs logtest.Lines
	b := newLoggedBackend(t, testbroker.Kafka(t).ListenAddrs(), &logs)
	q := declare(t, b, topology.New("sessions"))
	subscribe(t, q)
	wait.For(t, "the first reader's session line", func() bool { return logs.Count(SessionStartedLog) >= 1 })
	logs.Want(t, 1, "session lines of the first reader", "level=INFO", SessionStartedLog, "generation=1", "claims=[")
	subscribe(t, q) // a rebalance: the first reader's session ends, two start
	wait.For(t, "the rebalance's session lines", func() bool {
		return logs.Count(SessionStartedLog) >= 3 && logs.Count(SessionEndedLog) >= 1
	})
}

// flakyCodec is JSON that fails to encode while failing is set.
type flakyCodec struct {
	topic.JSONCodec[msg]
	failing *atomic.Bool
}

var errEncode = errors.New("encoder down")

func (c flakyCodec) Encode(v msg) ([]byte, error) {
	if c.failing.Load() {
		return nil, errEncode
	}
	return c.JSONCodec.Encode(v)
}

// failedHold declares a topology named name on a backend whose codec
// fails on demand, publishes messages 1 and 2, and returns a reader
// holding message 1, whose hold has just failed (the codec works again).
func failedHold(t *testing.T, name string, hold time.Duration) (q topology.Queues[msg], r topology.Reader[msg], l1 topology.Letter[msg]) {
	t.Helper()
	failing := new(atomic.Bool)
	b, err := New(Options[msg]{
		Brokers: testbroker.Kafka(t).ListenAddrs(), Config: testbroker.SaramaConfig(),
		Codec: flakyCodec{failing: failing}, RevokeTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "the backend", b.Close) })
	q = declare(t, b, topology.New(name).Hold(hold))
	for n := 1; n <= 2; n++ {
		if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	if r, err = q.Subscribe(t.Context()); err != nil {
		t.Fatal(err)
	}
	l1 = receiveOne(t, r)
	failing.Store(true)
	if err := q.Hold(t.Context(), 0, l1); !errors.Is(err, errEncode) {
		t.Fatalf("Hold with the encoder down: %v", err)
	}
	failing.Store(false)
	return q, r, l1
}

// Guarantee: a letter whose hand-off failed (here its hold) is never
// committed: Settle says so, and the group delivers it again after the
// reader leaves, even though later letters were settled.
func TestFailedHandOffIsNotCommitted(t *testing.T) {
	q, r1, l1 := failedHold(t, "fragile", time.Second)
	if err := r1.Settle(t.Context(), &l1); !errors.Is(err, ErrNotCommitted) {
		t.Errorf("Settle after a failed hold: %v, want ErrNotCommitted", err)
	}
	l2 := receiveOne(t, r1)
	if err := r1.Settle(t.Context(), &l2); err != nil {
		t.Fatal(err)
	}
	topologytest.MustClose(t, "the first reader", r1.Close)
	if got := receiveOne(t, subscribe(t, q)); got.Value.N != 1 {
		t.Errorf("the next reader received message %d first, want 1 again (its hold failed)", got.Value.N)
	}
}

// Guarantee: the last hand-off of a letter decides: a hold that succeeds
// after a failed one (a sequenced source hands such a letter off again
// itself) lets the letter be settled and committed, so the group does not
// deliver it again.
func TestHandOffAfterAFailedOneIsCommitted(t *testing.T) {
	q, r1, l1 := failedHold(t, "mended", time.Hour)
	if err := q.Hold(t.Context(), 0, l1); err != nil {
		t.Fatalf("Hold again: %v", err)
	}
	if err := r1.Settle(t.Context(), &l1); err != nil {
		t.Errorf("Settle after a hold that succeeded the second time: %v, want nil", err)
	}
	l2 := receiveOne(t, r1)
	if err := r1.Settle(t.Context(), &l2); err != nil {
		t.Fatal(err)
	}
	topologytest.MustClose(t, "the first reader", r1.Close)
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 3}}); err != nil {
		t.Fatal(err)
	}
	if got := receiveOne(t, subscribe(t, q)); got.Value.N != 3 {
		t.Errorf("the next reader received message %d first, want 3 (1 and 2 were committed)", got.Value.N)
	}
}

// Guarantee: a record whose history headers hold a negative shard or retry
// count (written by another producer of the main topic) is bad input: it is
// skipped, committed and counted (Undecodable) like a record that does not
// decode, and never
// reaches a source, where the count would index the hold queues and the
// shard the main topic's partitions (a panic on its next hand-off).
func TestNegativeCountHeadersAreSkipped(t *testing.T) {
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs())
	q := declare(t, b, topology.New("counts").Sequenced(topology.Skip).RoutingShards(2).Hold(time.Second).DLQ())
	r := subscribe(t, q)
	for _, h := range []string{HeaderShard, HeaderRetries} {
		if err := b.send(&sarama.ProducerMessage{Topic: "counts", Partition: 0, Key: sarama.StringEncoder("a"),
			Value:   sarama.StringEncoder(`{"Key":"a","N":1}`),
			Headers: []sarama.RecordHeader{header(h, "-1")}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{Key: "a", N: 2}, Key: "a", Shard: 0}); err != nil {
		t.Fatal(err)
	}
	got := receiveOne(t, r)
	if got.Value.N != 2 {
		t.Errorf("received %+v (shard %d, retries %d) first, want the well-formed message 2 (the others skipped)",
			got.Value, got.Shard, got.Retries)
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("requeuing it, as a source does an interrupted message, panicked: %v", p)
				}
			}()
			_ = q.Requeue(t.Context(), got)
		}()
	}
	if n := r.(topology.UndecodableCounter).Undecodable(); n != 2 {
		t.Errorf("Undecodable() = %d, want 2 (both records with a negative count)", n)
	}
}

// Guarantee: Replay reports the records of the DLQ its reader skipped and
// committed past because they do not decode (ReplayReport.Undecodable),
// replays the dead letters around them, and a later Replay meets them no
// more.
func TestReplayCountsTheDeadLettersThatDoNotDecode(t *testing.T) {
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs())
	q := declare(t, b, topology.New("replayed").DLQ())
	dlq, _ := q.Topology().DLQ()
	death := &topology.Death{Reason: topology.ReasonRejected, Topic: "replayed", Group: q.Topology().ConsumerGroup()}
	if err := q.DeadLetter(t.Context(), topology.Letter[msg]{Value: msg{N: 1}, Death: death}); err != nil {
		t.Fatal(err)
	}
	if err := b.send(&sarama.ProducerMessage{Topic: dlq, Partition: 0, Value: sarama.StringEncoder("not json")}); err != nil {
		t.Fatal(err)
	}
	if err := q.DeadLetter(t.Context(), topology.Letter[msg]{Value: msg{N: 2}, Death: death}); err != nil {
		t.Fatal(err)
	}
	rep, err := topology.Replay(t.Context(), q, topology.ReplayOptions[msg]{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Replayed) != 2 || rep.Kept != 0 || rep.Undecodable != 1 {
		t.Fatalf("Replay replayed %d, kept %d, met %d that do not decode; want 2, 0 and 1", len(rep.Replayed), rep.Kept, rep.Undecodable)
	}
	if rep, err = topology.Replay(t.Context(), q, topology.ReplayOptions[msg]{}); err != nil || len(rep.Replayed) != 0 || rep.Undecodable != 0 {
		t.Fatalf("a second Replay: %+v, %v; want nothing replayed and nothing undecodable (committed past)", rep, err)
	}
}
