package kafkatopic_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// TryPublish does not wait for room: while the broker holds every produce
// request and the producer's buffers are full, it reports DroppedOnFull
// and the dropped value never reaches the log; the publishes it accepted
// return Published once the broker acknowledges them, and a blocking
// Publish whose context ends first publishes nothing unless it says the
// record was already handed over (ErrUnconfirmed).
func TestTryPublishDropsWhenTheProducerIsFull(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.PublishBuffer = 1
	o.Config.ChannelBufferSize = 1
	o.Config.Producer.Flush.MaxMessages = 1
	o.Config.Net.MaxOpenRequests = 1
	b := newBackend(t, o)
	h := newTopic(t, b, "full", topic.Options{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})

	const k = 200
	type result struct {
		v   int
		out topic.PublishOutcome
		err error
	}
	results := make(chan result, k)
	for v := range k {
		go func() {
			out, err := h.TryPublish(v)
			results <- result{v, out, err}
		}()
	}
	var got []result
	wait.Within(t, patience, "a TryPublish to report DroppedOnFull", func() bool {
		for {
			select {
			case r := <-results:
				got = append(got, r)
			default:
				for _, r := range got {
					if r.out == topic.DroppedOnFull {
						return true
					}
				}
				return false
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Publish(ctx, -1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish with an ended context = %v", err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer wcancel()
	waited := h.Publish(wctx, -2)
	if !errors.Is(waited, context.DeadlineExceeded) {
		t.Fatalf("Publish waiting past its deadline = %v", waited)
	}
	unblock()
	for len(got) < k {
		got = append(got, <-results)
	}
	published := map[int]bool{}
	dropped := 0
	for _, r := range got {
		switch {
		case r.err != nil:
			t.Fatalf("TryPublish(%d): %v", r.v, r.err)
		case r.out == topic.Published:
			published[r.v] = true
		default:
			dropped++
		}
	}
	if st := h.Stats(); st.Dropped != uint64(dropped) || st.Published != uint64(len(published)) {
		t.Fatalf("Stats = %+v, want %d published and %d dropped", st, len(published), dropped)
	}
	// The log holds exactly the published values.
	cons, err := sarama.NewConsumer(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition("full", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	codec := topic.IntCodec{}
	total := int(pc.HighWaterMarkOffset())
	for range total {
		rec := <-pc.Messages()
		v, err := codec.Decode(rec.Value)
		switch {
		case err != nil:
			t.Fatal(err)
		case v == -2 && errors.Is(waited, kafkatopic.ErrUnconfirmed):
			// handed over before its deadline: it may be stored
		case !published[v]:
			t.Fatalf("the log holds %d (Publish: %v), which was not published", v, waited)
		}
		delete(published, v)
	}
	if len(published) > 0 {
		t.Fatalf("%d published values missing from the log", len(published))
	}
}

// Guarantee: a publish to a topic deleted while in use returns an error
// (the record is not stored), and the publishes after it, once the topic is
// created again, are stored. Run with -race: the producer keeps reading a
// failed record for a moment after reporting it, so a failed publish must
// not hand its record over to the next one.
func TestPublishToADeletedTopicFails(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	b := newBackend(t, o)
	h := newTopic(t, b, "deleted", topic.Options{})
	if err := h.Publish(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	admin, err := sarama.NewClusterAdmin(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.DeleteTopic("deleted"); err != nil {
		t.Fatal(err)
	}
	for v := 2; v < 5; v++ {
		if err := h.Publish(ctxT(t), v); err == nil || errors.Is(err, kafkatopic.ErrUnconfirmed) {
			t.Fatalf("Publish(%d) to the deleted topic = %v, want the producer's error", v, err)
		}
	}
	if err := admin.CreateTopic("deleted", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, patience, "a publish to the topic created again to be stored", func() bool {
		return h.Publish(ctxT(t), 5) == nil
	})
}
