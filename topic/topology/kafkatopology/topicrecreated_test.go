package kafkatopology

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a main topic deleted under a running group reader, after
// the group committed offsets in it, and created again (with the admin
// API, its partitions as before) is read from its oldest record: the
// reader's session ends once its fetch finds the topic unknown, and the
// group joins again once it exists, with no offsets in it (Kafka drops
// them with the topic). While the topic is missing the reader logs one
// WARN line naming it, not one per attempt to join. Every letter
// published to the topic created again is delivered, those below the old
// offsets among them, and a letter received from the deleted topic and
// not settled is revoked (Settle returns ErrRevoked).
func TestAMainTopicDeletedAndCreatedAgainIsReadFromItsOldestRecord(t *testing.T) {
	c := testbroker.Kafka(t)
	brokers := c.ListenAddrs()
	logs := &lockedBuffer{}
	b := newLoggedBackend(t, brokers, logs)
	q := declare(t, b, topology.New("recreated")).(*queues[msg])
	r := subscribe(t, q)
	admin := testbroker.Admin(t, brokers)
	topics, err := admin.ListTopics()
	if err != nil {
		t.Fatal(err)
	}
	parts := topics[q.main].NumPartitions
	const before = 4
	for n := 1; n <= before; n++ {
		if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	// The last letter received stays unsettled.
	var kept topology.Letter[msg]
	for i := range before {
		kept = receiveOne(t, r)
		if i < before-1 {
			if err := r.Settle(t.Context(), &kept); err != nil {
				t.Fatal(err)
			}
		}
	}
	committed := func() int64 {
		var sum int64
		for p := range parts {
			sum += max(committedOffset(t, brokers, q.main, q.groupID(), p), 0)
		}
		return sum
	}
	wait.For(t, "the group's offsets committed past the letters settled", func() bool { return committed() == before-1 },
		func() string { return logs.String() })

	// While held, the reader's fetches of the topic wait: the letters
	// are all published to the topic created again before it reads it.
	var held atomic.Bool
	gate := make(chan struct{})
	var open sync.Once
	release := func() { open.Do(func() { held.Store(false); close(gate) }) }
	t.Cleanup(release)
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !held.Load() {
			return nil, nil, false
		}
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			if rt.Topic == q.main {
				c.SleepControl(func() { <-gate })
				break
			}
		}
		return nil, nil, false
	})
	if err := admin.DeleteTopic(q.main); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the reader's fetch finding the topic unknown", func() bool {
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "consumer group error") && strings.Contains(line, "topic="+q.main) {
				return true
			}
		}
		return false
	}, func() string { return logs.String() })
	// While it stays deleted, the reader asks for it at its retry
	// intervals, and says so in one WARN line naming it (beside the one
	// of the unsettled letter its session let go of).
	var lookups atomic.Int32
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, rt := range req.(*kmsg.MetadataRequest).Topics {
			if rt.Topic != nil && *rt.Topic == q.main {
				lookups.Add(1)
			}
		}
		return nil, nil, false
	})
	wait.For(t, "more lookups of the deleted topic", func() bool { return lookups.Load() >= 10 },
		func() string { return logs.String() })
	var warns []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "topic="+q.main) && !strings.Contains(line, ReleasedHeldLog) {
			warns = append(warns, line)
		}
	}
	if len(warns) != 1 {
		t.Fatalf("%d WARN lines naming topic %q while it is deleted, want 1:\n%s", len(warns), q.main, strings.Join(warns, ""))
	}
	held.Store(true)
	if err := admin.CreateTopic(q.main, &sarama.TopicDetail{NumPartitions: parts, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	const after = 2 * before
	var want []int
	for n := 101; n < 101+after; n++ {
		if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
		want = append(want, n)
	}
	release()

	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	seen := map[int]bool{}
	buf := make([]topology.Letter[msg], after)
	for len(seen) < after {
		n, err := r.Receive(ctx, buf)
		if err != nil {
			t.Fatalf("received %v of the letters %v published to the topic created again, then Receive: %v\n%s",
				slices.Sorted(maps.Keys(seen)), want, err, logs.String())
		}
		for i := range n {
			seen[buf[i].Value.N] = true
			_ = r.Settle(t.Context(), &buf[i])
		}
	}
	if err := r.Settle(t.Context(), &kept); !errors.Is(err, ErrRevoked) {
		t.Fatalf("Settle of the letter left unsettled from the topic deleted = %v, want ErrRevoked", err)
	}
}

// Guarantee: a main topic deleted and created again several times under a
// running backend takes every publish after each re-creation, the first
// included: the broker refuses the producer's first batch to each new
// partition as out of order without storing it, and the producer, whose
// sequences that refusal started again at 0, sends it once more. The topic
// holds each letter published after the last re-creation once, in the
// order published.
func TestPublishAfterAMainTopicIsCreatedAgainSeveralTimesSucceeds(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs(), func(o *Options[msg]) { o.Partitions = 1 })
	q := declare(t, b, topology.New("recreated-often")).(*queues[msg])
	admin := testbroker.Admin(t, c.ListenAddrs())
	const n = 4
	for round := range 4 {
		if round > 0 {
			if err := admin.DeleteTopic(q.main); err != nil {
				t.Fatal(err)
			}
			if err := admin.CreateTopic(q.main, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
				t.Fatal(err)
			}
		}
		for v := range n {
			if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 100*round + v}}); err != nil {
				t.Fatalf("Publish(%d) after the topic was created again %d times: %v", 100*round+v, round, err)
			}
		}
	}
	recs, _ := logLetters(t, c, q.main)
	got := make([]int, len(recs))
	for i, r := range recs {
		var m msg
		if err := json.Unmarshal(r.Value, &m); err != nil {
			t.Fatal(err)
		}
		got[i] = m.N - 300
	}
	testbroker.OnceInOrder(t, "letters published after the last re-creation", got, n)
}
