package kafkatopology

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// BenchmarkPublishToAck measures a publish → broker ack → pipeline (two
// processors) → settle round per message through a Kafka topology (a
// hold, a DLQ) on kfake, with 8 publishers producing at once (each
// publish waits for the broker's acknowledgement, so one publisher would
// measure the round trip alone).
func BenchmarkPublishToAck(b *testing.B) {
	be := newBackend(b, testbroker.Kafka(b).ListenAddrs())
	top, err := topology.New("bench").Hold(time.Second).DLQ().Build()
	if err != nil {
		b.Fatal(err)
	}
	q, err := be.Declare(context.Background(), top)
	if err != nil {
		b.Fatal(err)
	}
	topologytest.PublishToAck(b, q, 8, time.Minute)
}

// BenchmarkReleaseBacklog measures how fast a releaser drains a hold
// partition whose letters are all due (held together and fallen due, as
// after a downstream outage): each round produces 2000 hold records due
// now in one request and ends once the releaser has marked them all for commit, that
// is once the broker acknowledged every release. It reports letters/s,
// with kfake answering each produce request at once and 2ms late.
func BenchmarkReleaseBacklog(b *testing.B) {
	const n = 2000
	for _, delay := range []time.Duration{0, 2 * time.Millisecond} {
		b.Run("produce-delay="+delay.String(), func(b *testing.B) {
			c := testbroker.Kafka(b)
			be := newBackend(b, c.ListenAddrs())
			top, err := topology.New("drain").Hold(time.Second).Build()
			if err != nil {
				b.Fatal(err)
			}
			qs, err := be.Declare(context.Background(), top)
			if err != nil {
				b.Fatal(err)
			}
			q := qs.(*queues[topologytest.Msg])
			hold := q.holds[0].name
			if delay > 0 {
				c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
					c.KeepControl()
					c.SleepControl(func() { time.Sleep(delay) })
					return nil, nil, false
				})
			}
			var released int64
			b.ReportAllocs()
			var spent time.Duration
			for b.Loop() {
				start := time.Now()
				holdDue(b, be, q, n)
				released += n
				wait.Within(b, time.Minute, "the backlog released", func() bool {
					h, ok := holdOf(be, hold, 0)
					return ok && h.Committed == released
				})
				spent += time.Since(start)
			}
			b.ReportMetric(float64(released)/spent.Seconds(), "letters/s")
		})
	}
}
