package kafkatopology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkatopicid"
	"github.com/boulevard-go/boulevard/internal/repeatlog"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// fakeSession is a group session over claims, whose context is ctx, in
// the group's generation gen; it commits nothing.
type fakeSession struct {
	ctx    context.Context
	claims map[string][]int32
	gen    int32
}

func (s *fakeSession) Claims() map[string][]int32                  { return s.claims }
func (s *fakeSession) MemberID() string                            { return "member" }
func (s *fakeSession) GenerationID() int32                         { return s.gen }
func (s *fakeSession) MarkOffset(string, int32, int64, string)     {}
func (s *fakeSession) Commit()                                     {}
func (s *fakeSession) ResetOffset(string, int32, int64, string)    {}
func (s *fakeSession) MarkMessage(*sarama.ConsumerMessage, string) {}
func (s *fakeSession) Context() context.Context                    { return s.ctx }

// endedClaim is a claim whose messages channel is closed: the group takes
// the partition away (or the session ends) as the claim begins.
type endedClaim struct {
	topic string
	part  int32
}

func (c endedClaim) Topic() string              { return c.topic }
func (c endedClaim) Partition() int32           { return c.part }
func (c endedClaim) InitialOffset() int64       { return 0 }
func (c endedClaim) HighWaterMarkOffset() int64 { return 0 }
func (c endedClaim) Messages() <-chan *sarama.ConsumerMessage {
	ch := make(chan *sarama.ConsumerMessage)
	close(ch)
	return ch
}

// shardsReader is a group reader of the main topic of a sequenced
// topology of three routing shards (so three partitions, shard i's
// letters going to partition i) that runs no session of its own: the
// test drives its sarama.ConsumerGroupHandler methods. What it tells
// (ShardNotifier) is recorded as "assigned [0 2]", "released [1]".
func shardsReader(t *testing.T) (r *groupReader[msg], told func() []string) {
	t.Helper()
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs())
	q := declare(t, b, topology.New("tells").Sequenced(topology.Skip).RoutingShards(3).Hold(time.Second)).(*queues[msg])
	cfg := *b.cfg
	r = &groupReader[msg]{buffer: newBuffer[msg](8, b.log), reach: newReach(&cfg), b: b, topic: q.main, gid: "tells",
		ctx: t.Context(), claims: map[int32]*claim{}, id: kafkatopicid.Watch{Client: b.client, Topic: q.main}, fails: repeatlog.Group{Prefix: "kafkatopology", Log: b.log}}
	var got []string
	r.OnShards(func(change topology.ShardChange, in func(shard int) bool) {
		var shards []int
		for s := range 3 {
			if in(s) {
				shards = append(shards, s)
			}
		}
		got = append(got, fmt.Sprintf("%s %v", change, shards))
	})
	return r, func() []string {
		out := got
		got = nil
		return out
	}
}

// startSession runs r's Setup for a session over parts of r's topic whose
// context is ctx, and returns it.
func startSession(t *testing.T, r *groupReader[msg], ctx context.Context, parts ...int32) *fakeSession {
	t.Helper()
	sess := &fakeSession{ctx: ctx, claims: map[string][]int32{r.topic: parts}, gen: 1}
	if err := r.Setup(sess); err != nil {
		t.Fatal(err)
	}
	return sess
}

// claimEnded runs r's ConsumeClaim of part in sess, a claim that ends as
// it begins.
func claimEnded(t *testing.T, r *groupReader[msg], sess *fakeSession, part int32) {
	t.Helper()
	if err := r.ConsumeClaim(sess, endedClaim{r.topic, part}); err != nil {
		t.Fatal(err)
	}
}

// Guarantee: a group reader tells a sequenced source, by the routing
// shards whose letters go to each partition, each session's assignment
// as it starts and each partition as it lets it go; in a session that
// goes on across rebalances (a cooperative protocol), a partition
// revoked is told let go, then the assignment left without it, and one
// assigned again by the assignment with it, before its claim hands out
// a letter. A new session starts from its whole assignment.
func TestAGroupReaderTellsEachAssignmentAndEachPartitionItLetsGo(t *testing.T) {
	r, told := shardsReader(t)
	sess := startSession(t, r, t.Context(), 0, 2)
	if got, want := told(), []string{"assigned [0 2]"}; !slices.Equal(got, want) {
		t.Errorf("told %q as the session started, want %q", got, want)
	}
	// A cooperative rebalance revokes partition 2: the session goes on,
	// in the rebalance's generation.
	sess.gen++
	sess.claims = map[string][]int32{r.topic: {0}}
	claimEnded(t, r, sess, 2)
	if got, want := told(), []string{"released [2]", "assigned [0]"}; !slices.Equal(got, want) {
		t.Errorf("told %q as partition 2 was revoked, want %q", got, want)
	}
	// A later one assigns it again, in the same session.
	sess.gen++
	sess.claims = map[string][]int32{r.topic: {0, 2}}
	claimEnded(t, r, sess, 2)
	if got, want := told(), []string{"assigned [0 2]", "released [2]", "assigned [0]"}; !slices.Equal(got, want) {
		t.Errorf("told %q as partition 2 came back in the session (and went again), want %q", got, want)
	}
	// A new session: its claims are its assignment, nothing comes back.
	claimEnded(t, r, startSession(t, r, t.Context(), 1, 2), 2)
	if got, want := told(), []string{"assigned [1 2]", "released [2]"}; !slices.Equal(got, want) {
		t.Errorf("told %q in a new session, want %q", got, want)
	}
}

// Guarantee: in a session that goes on across rebalances (a cooperative
// protocol), a group reader that a rebalance assigns several partitions
// tells the whole assignment once, as the first of their claims starts:
// told one partition at a time, an assignment would leave out for a
// while the shards of the others, and a sequenced source would stop
// holding their keys' letters back for messages out that come back to
// this reader.
func TestAGroupReaderTellsPartitionsAssignedTogetherInOneAssignment(t *testing.T) {
	r, told := shardsReader(t)
	ctx, cancel := context.WithCancel(t.Context())
	sess := startSession(t, r, ctx, 0)
	claimOpen(t, r, sess, cancel, 0)
	sess.gen++
	sess.claims = map[string][]int32{r.topic: {0, 1, 2}}
	claimOpen(t, r, sess, cancel, 1)
	claimOpen(t, r, sess, cancel, 2)
	if got, want := told(), []string{"assigned [0]", "assigned [0 1 2]"}; !slices.Equal(got, want) {
		t.Errorf("told %q as partitions 1 and 2 were assigned together, want %q", got, want)
	}
}

// Guarantee: a group reader whose client's metadata does not know its
// topic's partitions tells what keeps a sequenced source's keys as they
// are: every shard in an assignment, none in a partition let go.
func TestAGroupReaderThatDoesNotKnowItsTopicsPartitionsTellsWhatKeepsTheKeys(t *testing.T) {
	r, told := shardsReader(t)
	r.topic = "not-declared"
	claimEnded(t, r, startSession(t, r, t.Context(), 0), 0)
	if got, want := told(), []string{"assigned [0 1 2]", "released []"}; !slices.Equal(got, want) {
		t.Errorf("told %q, want %q", got, want)
	}
}

// openClaim is a claim whose messages channel, empty, stays open until
// msgs is closed (the group takes the partition away).
type openClaim struct {
	endedClaim
	msgs chan *sarama.ConsumerMessage
}

func (c openClaim) Messages() <-chan *sarama.ConsumerMessage { return c.msgs }

// claimOpen runs r's ConsumeClaim of part in sess, a claim that reads
// until sess ends or revoke is called, and waits until it has started.
// revoke closes its messages channel and waits for ConsumeClaim to
// return; the claim is ended (sess's context cancelled) and waited for
// when the test ends.
func claimOpen(t *testing.T, r *groupReader[msg], sess *fakeSession, cancel context.CancelFunc, part int32) (revoke func()) {
	t.Helper()
	c := openClaim{endedClaim{r.topic, part}, make(chan *sarama.ConsumerMessage)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.ConsumeClaim(sess, c)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wait.For(t, fmt.Sprintf("the claim of partition %d to start", part), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.claims[part] != nil
	})
	return func() {
		close(c.msgs)
		<-done
	}
}

// Guarantee: a group reader's TryReceive tells it has caught up only
// with every partition its session holds: a partition whose claim ends
// on its own in the session's first generation (its only one under an
// eager strategy) is held until the session ends, which it ends next,
// and TryReceive has not caught up without it; one a cooperative
// rebalance revokes, which comes in a later generation, the session no
// longer holds, and TryReceive catches up with the others at once.
func TestTryReceiveCatchesUpWithEveryPartitionTheSessionHolds(t *testing.T) {
	buf := make([]topology.Letter[msg], 1)

	r, _ := shardsReader(t)
	ctx, cancel := context.WithCancel(t.Context())
	sess := startSession(t, r, ctx, 0, 1)
	claimOpen(t, r, sess, cancel, 0)
	claimEnded(t, r, sess, 1) // on its own: the session still holds it
	short, stop := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer stop()
	if n, err := r.TryReceive(short, buf); !errors.Is(err, ErrCatchUp) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("TryReceive without a partition whose claim ended on its own = %d, %v; want ErrCatchUp by its deadline", n, err)
	}

	r, _ = shardsReader(t)
	ctx, cancel = context.WithCancel(t.Context())
	sess = startSession(t, r, ctx, 0, 1)
	sess.gen++ // a cooperative rebalance, which revokes partition 1
	claimOpen(t, r, sess, cancel, 0)
	claimEnded(t, r, sess, 1)
	bounded, end := context.WithTimeout(t.Context(), 10*time.Second) // far below AdminTimeout's 30s
	defer end()
	if n, err := r.TryReceive(bounded, buf); n != 0 || err != nil {
		t.Errorf("TryReceive, partition 1 revoked = %d, %v; want 0, nil at once", n, err)
	}
}

// Guarantee: a group reader's TryReceive under way, waiting for a
// partition's claim to fetch up to the log end, returns at once, caught
// up, when a cooperative rebalance revokes that partition: it no longer
// waits for it.
func TestTryReceiveUnderWayCatchesUpWhenARebalanceRevokesThePartitionItWaitsFor(t *testing.T) {
	r, _ := shardsReader(t)
	// Partition 1 holds a record its claim never fetches.
	if err := r.b.send(&sarama.ProducerMessage{Topic: r.topic, Partition: 1, Value: sarama.StringEncoder("{}")}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	sess := startSession(t, r, ctx, 0, 1)
	sess.gen++ // a cooperative rebalance, which revokes partition 1
	claimOpen(t, r, sess, cancel, 0)
	revoke := claimOpen(t, r, sess, cancel, 1)

	type result struct {
		n   int
		err error
	}
	got := make(chan result, 1)
	bounded, end := context.WithTimeout(t.Context(), 10*time.Second) // far below AdminTimeout's 30s
	defer end()
	go func() {
		n, err := r.TryReceive(bounded, make([]topology.Letter[msg], 1))
		got <- result{n, err}
	}()
	// The claims' starts woke the reader (r.fetched); TryReceive, not
	// caught up, waits once it has taken that.
	wait.For(t, "TryReceive to wait", func() bool { return len(r.fetched) == 0 })
	revoke()
	if res := <-got; res.n != 0 || res.err != nil {
		t.Errorf("TryReceive under way as partition 1 was revoked = %d, %v; want 0, nil at once", res.n, res.err)
	}
}
