package kafkatopic_test

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// benchPublishers is how many goroutines publish at once; each waits for
// the broker's acknowledgement of every message, in both benchmarks.
const benchPublishers = 32

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per message since start (the
// cluster runs in the process, so it counts too, for both benchmarks):
// far steadier than the wall time when other processes share the machine.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/msg")
}

// publishAll runs publish for b.N values spread over benchPublishers
// goroutines.
func publishAll(b *testing.B, publish func(v int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range benchPublishers {
		wg.Go(func() {
			for {
				v := next.Add(1)
				if v > int64(b.N) {
					return
				}
				if err := publish(int(v)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkPublishSubscribe is one message published through the Kafka
// backend (waiting for the broker's acknowledgement) and received and
// acked by a balanced group member, on an in-process kfake cluster.
func BenchmarkPublishSubscribe(b *testing.B) {
	benchPublishSubscribe(b, func(ctx context.Context, h *topic.Handle[int], v int) error { return h.Publish(ctx, v) })
}

// BenchmarkPublishSubscribeHeaders is BenchmarkPublishSubscribe with two
// headers on every message (a W3C traceparent and a short one).
func BenchmarkPublishSubscribeHeaders(b *testing.B) {
	hdr := topic.Headers{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tenant": "acme"}
	benchPublishSubscribe(b, func(ctx context.Context, h *topic.Handle[int], v int) error {
		_, err := h.PublishWithHeaders(ctx, v, hdr, topic.Block)
		return err
	})
}

func benchPublishSubscribe(b *testing.B, publish func(ctx context.Context, h *topic.Handle[int], v int) error) {
	c := testbroker.Kafka(b)
	be := newBackend(b, testOptions[int](c, topic.IntCodec{}))
	h := newTopic(b, be, "bench", topic.Options{})
	sub := subscribe(b, h, topic.Balanced("g"))
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	got := make(chan struct{})
	go func() {
		defer close(got)
		buf := make([]topic.Item[int], 256)
		for n := 0; n < b.N; {
			k, err := sub.ReceiveBatch(context.Background(), buf)
			if err != nil {
				b.Error(err)
				return
			}
			for _, it := range buf[:k] {
				_ = sub.Ack(it.ID)
			}
			n += k
		}
	}()
	ctx := context.Background()
	t0 := time.Now()
	publishAll(b, func(v int) error { return publish(ctx, h, v) })
	b.ReportMetric(float64(time.Since(t0).Nanoseconds())/float64(b.N), "pub-ns/msg")
	<-got
	reportCPU(b, start)
}

// BenchmarkPlainSarama is the same loop written directly on sarama: a
// SyncProducer per message and a consumer group marking each message.
func BenchmarkPlainSarama(b *testing.B) {
	c := testbroker.Kafka(b)
	cfg := testbroker.SaramaConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	admin, err := sarama.NewClusterAdmin(c.ListenAddrs(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := admin.CreateTopic("bench", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		b.Fatal(err)
	}
	_ = admin.Close()
	prod, err := sarama.NewSyncProducer(c.ListenAddrs(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	cg, err := sarama.NewConsumerGroup(c.ListenAddrs(), "g", cfg)
	if err != nil {
		b.Fatal(err)
	}
	ready := make(chan struct{})
	h := &benchHandler{n: b.N, ready: ready, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{"bench"}, h); err != nil {
				return
			}
		}
	}()
	<-ready
	codec := topic.IntCodec{}
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	t0 := time.Now()
	publishAll(b, func(v int) error {
		payload, _ := codec.Encode(v)
		_, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "bench", Value: sarama.ByteEncoder(payload)})
		return err
	})
	b.ReportMetric(float64(time.Since(t0).Nanoseconds())/float64(b.N), "pub-ns/msg")
	<-h.done
	reportCPU(b, start)
	b.StopTimer()
	cancel()
	<-consumed
	_ = cg.Close()
}

type benchHandler struct {
	n     int
	seen  int
	ready chan struct{}
	once  sync.Once
	done  chan struct{}
}

func (h *benchHandler) Setup(sarama.ConsumerGroupSession) error {
	h.once.Do(func() { close(h.ready) })
	return nil
}

func (h *benchHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *benchHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	codec := topic.IntCodec{}
	for m := range claim.Messages() {
		if _, err := codec.Decode(m.Value); err != nil {
			return err
		}
		sess.MarkMessage(m, "")
		if h.seen++; h.seen == h.n {
			close(h.done)
		}
	}
	return nil
}
