package kafkatopic_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: partitions added to the Kafka topic of a balanced
// subscription are picked up within Config.Metadata.RefreshFrequency: the
// values published to them reach the group's member, none lost.
func TestPartitionsAddedUnderABalancedSubscriptionReachIt(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.Config.Metadata.RefreshFrequency = 300 * time.Millisecond
	o.Key = func(v int) []byte { return []byte(strconv.Itoa(v)) }
	h := newTopic(t, newBackend(t, o), "grown", topic.Options{})
	s := subscribe(t, h, topic.Balanced("g"))
	roundTrip(t, h, s, -1)
	if err := testbroker.Admin(t, c.ListenAddrs()).CreatePartitions("grown", 3, nil, false); err != nil {
		t.Fatal(err)
	}
	// A publisher that knows the three partitions from its start.
	h2 := newTopic(t, newBackend(t, o), "grown", topic.Options{})
	const n = 30
	for v := range n {
		if err := h2.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int]bool{}
	for len(got) < n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		it, err := s.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Receive after %d of %d values: %v", len(got), n, err)
		}
		got[it.Value] = true
		if err := s.Ack(it.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// Guarantee: deleting the Kafka topic of a balanced subscription neither
// ends it nor makes its member spin: the member logs one WARN naming the
// topic ("consumer group session failed; joining again", repeats held
// back, however many sessions fail) and joins again; once the topic is created again, a value
// published to it reaches the subscription (the cluster dropped the
// group's offsets with the topic, and the group reads a partition
// without one from its oldest record).
func TestATopicDeletedUnderABalancedSubscriptionIsReadAgainOnceCreatedAgain(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.Config.Metadata.RefreshFrequency = 300 * time.Millisecond
	var logs logBuffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	h := newTopic(t, newBackend(t, o), "gone", topic.Options{})
	s := subscribe(t, h, topic.Balanced("g"))
	roundTrip(t, h, s, 1)
	// The member keeps looking the topic up, session after session; one
	// line says so, not one per session.
	admin := deleteGone(t, c, &logs, "consumer group session failed; joining again", 2)
	if err := admin.CreateTopic("gone", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, patience, "a publish to the topic created again to be stored", func() bool {
		return h.Publish(ctxT(t), 2) == nil
	})
	if it := recv(t, s); it.Value != 2 {
		t.Fatalf("received %v, want 2", it.Value)
	}
}

// Guarantee: deleting the Kafka topic of a broadcast subscriber, under
// either lag policy, neither ends it nor makes it spin: it logs one WARN
// naming the topic ("broadcast consumer error", repeats held back,
// however many fetches fail) and Receive waits; once the topic is created
// again, the subscriber reads it from its oldest record, with no lag
// notice (the new partition's offsets begin anew, below the subscriber's
// position), so nothing published to the new topic is missed.
func TestATopicDeletedUnderABroadcastSubscriberIsReadFromItsOldestRecordOnceCreatedAgain(t *testing.T) {
	for _, onLag := range []topic.OnLag{topic.DropOldest, topic.Disconnect} {
		t.Run(onLag.String(), func(t *testing.T) {
			c := testbroker.Kafka(t)
			o := testOptions[int](c, topic.IntCodec{})
			var logs logBuffer
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			h := newTopic(t, newBackend(t, o), "gone", topic.Options{Mode: topic.BroadcastOnly,
				Broadcast: topic.BroadcastPolicy{OnLag: onLag}})
			s := subscribe(t, h, topic.Broadcast())
			for v := range 3 {
				if err := h.Publish(ctxT(t), v); err != nil {
					t.Fatal(err)
				}
				if it := recv(t, s); it.Value != v || it.Lagged != 0 {
					t.Fatalf("received %+v, want value %d", it, v)
				}
			}
			// The subscriber keeps looking the topic up, fetch after fetch;
			// one line says so, not one per fetch.
			admin := deleteGone(t, c, &logs, "kafkatopic: broadcast consumer error\"", 1)
			done, cancel := context.WithCancel(context.Background())
			cancel()
			if it, err := s.Receive(done); !errors.Is(err, context.Canceled) {
				t.Fatalf("Receive while the topic is deleted = %+v, %v; want it to wait", it, err)
			}
			if err := admin.CreateTopic("gone", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
				t.Fatal(err)
			}
			// Fewer records than the subscriber read of the old topic: its
			// position is past the new partition's log end.
			for _, v := range []int{10, 11} {
				wait.Within(t, patience, "a publish to the topic created again to be stored", func() bool {
					return h.Publish(ctxT(t), v) == nil
				})
			}
			for _, v := range []int{10, 11} {
				if it := recv(t, s); it.Value != v || it.Lagged != 0 {
					t.Fatalf("received %+v, want value %d", it, v)
				}
			}
		})
	}
}

// roundTrip publishes v on h, receives it on s and acknowledges it.
func roundTrip(t *testing.T, h *topic.Handle[int], s *topic.Subscription[int], v int) {
	t.Helper()
	if err := h.Publish(ctxT(t), v); err != nil {
		t.Fatal(err)
	}
	it := recv(t, s)
	if it.Value != v {
		t.Fatalf("received %v, want %v", it.Value, v)
	}
	if err := s.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
}

// deleteGone deletes the Kafka topic "gone" of c and waits for a WARN
// line with failed naming it, then for 20 more lookups of the topic; it
// fails t if more than most lines with failed were logged by then. It
// returns the admin it deleted the topic with.
func deleteGone(t *testing.T, c *kfake.Cluster, logs *logBuffer, failed string, most int) sarama.ClusterAdmin {
	t.Helper()
	lookups := countLookups(c, "gone")
	admin := testbroker.Admin(t, c.ListenAddrs())
	if err := admin.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, patience, "a WARN naming the deleted topic", func() bool {
		for l := range strings.Lines(logs.String()) {
			if strings.Contains(l, failed) && strings.Contains(l, "topic=gone") && strings.Contains(l, "level=WARN") {
				return true
			}
		}
		return false
	})
	seen := lookups.Load()
	wait.Within(t, patience, "more lookups of the deleted topic", func() bool { return lookups.Load() >= seen+20 })
	if n := strings.Count(logs.String(), failed); n > most {
		t.Fatalf("%d lines %q while the topic stays deleted, want at most %d:\n%s", n, failed, most, logs.String())
	}
	return admin
}

// countLookups counts from now on the metadata requests to c naming the
// Kafka topic kname.
func countLookups(c *kfake.Cluster, kname string) *atomic.Int32 {
	var n atomic.Int32
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, rt := range req.(*kmsg.MetadataRequest).Topics {
			if rt.Topic != nil && *rt.Topic == kname {
				n.Add(1)
			}
		}
		return nil, nil, false
	})
	return &n
}
