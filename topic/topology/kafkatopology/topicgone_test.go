package kafkatopology

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a Publish, Hold or DeadLetter to a topic of the topology
// deleted under a running backend fails with an error naming the topic,
// on a cluster that creates the topics a client asks for (Kafka's
// auto.create.topics.enable, true by default): the backend does not
// create the topic again with the broker's defaults (its partition count,
// a retention that deletes held and dead letters), nor do its readers and
// releasers, which keep asking for it. A hand-off that fails so keeps its
// letter uncommitted (Settle returns ErrNotCommitted); once Declare has
// created the topic again, the same hand-off succeeds and the letter is
// settled, and a deleted hold topic's releaser and DLQ's reader, having
// logged one WARN naming the topic, read it again.
func TestAHandOffToADeletedTopicFailsNamingItAndDoesNotCreateItAgain(t *testing.T) {
	for _, kind := range []string{"main", "hold", "dlq"} {
		t.Run(kind, func(t *testing.T) {
			c := testbroker.Kafka(t, kfake.AllowAutoTopicCreation())
			logs := &lockedBuffer{}
			b := newLoggedBackend(t, c.ListenAddrs(), logs)
			tb := topology.New("gone").Hold(time.Second).DLQ()
			q := declare(t, b, tb).(*queues[msg])
			r := subscribe(t, q)
			dead := subscribeDead(t, q)
			if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 1}}); err != nil {
				t.Fatal(err)
			}
			l := receiveOne(t, r)
			target, handOff := q.main, func(ctx context.Context) error {
				return q.Publish(ctx, topology.Letter[msg]{Value: msg{N: 2}})
			}
			switch kind {
			case "hold":
				target, handOff = q.holds[0].name, func(ctx context.Context) error { return q.Hold(ctx, 0, l) }
			case "dlq":
				target, handOff = q.dlq, func(ctx context.Context) error { return q.DeadLetter(ctx, l) }
			}
			var lookups atomic.Int32 // metadata requests naming the topic
			c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				for _, rt := range req.(*kmsg.MetadataRequest).Topics {
					if rt.Topic != nil && *rt.Topic == target {
						lookups.Add(1)
					}
				}
				return nil, nil, false
			})
			admin := testbroker.Admin(t, c.ListenAddrs())
			if err := admin.DeleteTopic(target); err != nil {
				t.Fatal(err)
			}
			err := handOff(t.Context())
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", target)) ||
				!errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
				t.Fatalf("hand-off to the deleted topic %q = %v, want an error naming it and wrapping ErrUnknownTopicOrPartition", target, err)
			}
			if kind != "main" {
				if err := r.Settle(t.Context(), &l); !errors.Is(err, ErrNotCommitted) {
					t.Fatalf("Settle after the failed hand-off = %v, want ErrNotCommitted", err)
				}
			}
			// The readers and the releaser go on asking for the topic.
			seen := lookups.Load()
			wait.For(t, "more lookups of the deleted topic", func() bool { return lookups.Load() >= seen+10 },
				func() string { return logs.String() })
			topics, err := admin.ListTopics()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := topics[target]; ok {
				t.Fatalf("topic %q exists again after its deletion: %+v", target, topics[target])
			}
			declare(t, b, tb)
			if err := handOff(t.Context()); err != nil {
				t.Fatalf("hand-off once Declare created the topic again: %v", err)
			}
			if kind != "main" {
				if err := r.Settle(t.Context(), &l); err != nil {
					t.Fatalf("Settle after the hand-off succeeded: %v", err)
				}
			}
			// The hold's releaser and the DLQ's reader read their topic
			// again, each logging its failure once while it was gone.
			from := r
			switch kind {
			case "main":
				return
			case "dlq":
				from = dead
			}
			if got := receiveOne(t, from); got.Value.N != 1 {
				t.Fatalf("received %+v from the topic created again, want message 1", got)
			}
			var warns []string
			for line := range strings.Lines(logs.String()) {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, "topic="+target) {
					warns = append(warns, line)
				}
			}
			if len(warns) != 1 {
				t.Fatalf("%d WARN lines naming topic %q, want 1:\n%s", len(warns), target, strings.Join(warns, ""))
			}
		})
	}
}
