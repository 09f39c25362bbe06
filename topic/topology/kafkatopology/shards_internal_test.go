package kafkatopology

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/repeatlog"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// fakeSession is a group session over claims, whose context is ctx; it
// commits nothing.
type fakeSession struct {
	ctx    context.Context
	claims map[string][]int32
}

func (s *fakeSession) Claims() map[string][]int32                  { return s.claims }
func (s *fakeSession) MemberID() string                            { return "member" }
func (s *fakeSession) GenerationID() int32                         { return 1 }
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
		ctx: t.Context(), claims: map[int32]*claim{}, fails: repeatlog.Group{Prefix: "kafkatopology", Log: b.log}}
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
	sess := &fakeSession{ctx: ctx, claims: map[string][]int32{r.topic: parts}}
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
// assigned again, which a rebalance revoked earlier in the session, by
// the assignment held without it and then the one with it, before its
// claim hands out a letter. A new session starts from its whole
// assignment.
func TestAGroupReaderTellsEachAssignmentAndEachPartitionItLetsGo(t *testing.T) {
	r, told := shardsReader(t)
	sess := startSession(t, r, t.Context(), 0, 2)
	if got, want := told(), []string{"assigned [0 2]"}; !slices.Equal(got, want) {
		t.Errorf("told %q as the session started, want %q", got, want)
	}
	// A cooperative rebalance revokes partition 2: the session goes on.
	claimEnded(t, r, sess, 2)
	if got, want := told(), []string{"released [2]"}; !slices.Equal(got, want) {
		t.Errorf("told %q as partition 2 was revoked, want %q", got, want)
	}
	// A later one assigns it again, in the same session.
	claimEnded(t, r, sess, 2)
	if got, want := told(), []string{"assigned [0]", "assigned [0 2]", "released [2]"}; !slices.Equal(got, want) {
		t.Errorf("told %q as partition 2 came back in the session (and went again), want %q", got, want)
	}
	// A new session: its claims are its assignment, nothing comes back.
	claimEnded(t, r, startSession(t, r, t.Context(), 1, 2), 2)
	if got, want := told(), []string{"assigned [1 2]", "released [2]"}; !slices.Equal(got, want) {
		t.Errorf("told %q in a new session, want %q", got, want)
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
