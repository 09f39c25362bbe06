package pulsar_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// Stats count what reached the stage, what came back, what was nacked and
// what the client moved to the dead-letter topic: a message that always
// fails, with MaxDeliveries 3, is received three times (twice as a
// redelivery), nacked three times and dead-lettered once; the others are
// received once.
func TestStatsCountRedeliveriesNacksAndDeadLetters(t *testing.T) {
	e := newEnv(t)
	e.publish("stats-dlq", "m", 5)
	co := earliest()
	co.NackRedeliveryDelay = 20 * time.Millisecond
	co.DLQ = &pulsar.DLQPolicy{MaxDeliveries: 3, DeadLetterTopic: "stats-dlq-dead", InitialSubscriptionName: "dead",
		ProducerOptions: pulsar.ProducerOptions{SendTimeout: -1}}
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"stats-dlq"}, Subscription: "sub", Consumer: co})
	_, stop := start(t, pipeline.Options[[]byte, []byte]{
		Name:     "stats",
		Logger:   testLogger(),
		Producer: producer.Options[[]byte]{Source: src},
		Processors: processor.Options[[]byte, []byte]{Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
			if string(m.Data) == "m-1" {
				return nil, errors.New("always fails")
			}
			return m.Data, nil
		}},
	})
	wait.Within(t, waitLimit, "the poison message in the dead letter topic", func() bool { return len(e.broker.Messages("stats-dlq-dead")) == 1 })
	wait.Within(t, waitLimit, "the backlog to empty", func() bool { return e.broker.Backlog("stats-dlq", "sub") == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st := src.Stats()
	if st.Received != 7 || st.Redelivered != 2 || st.Nacked != 3 || st.DeadLettered != 1 {
		t.Fatalf("stats %+v: want 7 received, 2 redelivered, 3 nacked, 1 dead-lettered", st)
	}
}

// Stats show the permits: with nothing leaving the stage, the default
// window's 100 permits are granted, 51 used for the messages the stage
// holds, and the client's queue of 49 counted; once every message has left
// the stage, each used one permit, and the grants stayed within a window of
// what left.
func TestStatsShowPermitsAndClientQueue(t *testing.T) {
	e := newEnv(t)
	e.publish("stats-permits", "m", 500)
	out := newGatedOutput()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"stats-permits"}, Subscription: "sub", Consumer: earliest()})
	startProducer(t, src, 1, producer.Flow{}, out)
	want := bpulsar.Stats{Consumers: 1, Received: 51, PermitsGranted: 100, PermitsAvailable: 49, ClientQueue: 49}
	wait.Within(t, waitLimit, "the stage to hold its share of the window", func() bool { return src.Stats() == want })
	out.allow(500)
	wait.Within(t, waitLimit, "every message to leave the stage", func() bool {
		st := src.Stats()
		return st.Received == 500 && st.PermitsGranted-st.PermitsAvailable == 500
	})
	if st := src.Stats(); st.PermitsGranted > 600 || st.ClientQueue != 49 {
		t.Fatalf("stats %+v: want at most 600 permits granted for 500 messages, and the client queue of 49", st)
	}
}

// Guarantee: Stats().ClientQueue counts the client's queue of every
// partition of a partitioned topic: with the default window's share of
// 49, a queue of 16 for each of 3 partitions is 48.
func TestStatsCountTheClientQueueOfEveryPartition(t *testing.T) {
	e := newEnv(t)
	if err := e.broker.CreateTopic("stats-parts", 3); err != nil {
		t.Fatal(err)
	}
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"stats-parts"}, Subscription: "sub", Consumer: earliest()})
	startProducer(t, src, 1, producer.Flow{}, newGatedOutput())
	wait.Within(t, waitLimit, "the consumer to subscribe", func() bool { return src.Stats().Consumers == 1 })
	if q := src.Stats().ClientQueue; q != 48 {
		t.Errorf("ClientQueue = %d for a topic of 3 partitions, want 48 (16 per partition)", q)
	}
}

// Readings of a source's Stats taken while it receives, nacks and receives
// again never show more messages acked, nacked or with dropped acks (put
// together), or redelivered, than received, nor more permits available
// than granted, and no counter goes down. The readings run on the one processor the test leaves the
// runtime, so that the scheduler's preemption, which may stop a reading at
// any point, lets the source go on in the middle of one.
func TestStatsNeverShowMoreOutcomesThanMessagesReceived(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const n = 300
	e := newEnv(t)
	e.publish("stats-readings", "m", n)
	co := earliest()
	co.NackRedeliveryDelay = time.Millisecond
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"stats-readings"}, Subscription: "sub", Consumer: co})
	run(t, src, 1, producer.Flow{}, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		if md, _ := message.MetadataAs[*bpulsar.Metadata](m); md.RedeliveryCount == 0 {
			return nil, errors.New("fails the first time")
		}
		return m.Data, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	var last bpulsar.Stats
	readings := 0
	for last.Received < 2*n && ctx.Err() == nil {
		st := src.Stats()
		if st.Acked+st.Nacked+st.DroppedAcks > st.Received || st.Redelivered > st.Received || st.PermitsAvailable > st.PermitsGranted {
			t.Fatalf("stats %+v show more messages acked, nacked or with dropped acks, or redelivered, than received, or more permits available than granted", st)
		}
		if st.Received < last.Received || st.Acked < last.Acked || st.Nacked < last.Nacked || st.Redelivered < last.Redelivered || st.PermitsGranted < last.PermitsGranted {
			t.Fatalf("counters went down: %+v after %+v", st, last)
		}
		last = st
		// Readings in bursts: between them the stage and the client, on
		// the one processor, move on, so that the run ends well within
		// waitLimit; within them the scheduler preempts a reading at any
		// point, between the counters it loads.
		if readings++; readings%64 == 0 {
			runtime.Gosched()
		}
	}
	if last.Received < 2*n || last.Nacked < n {
		t.Fatalf("stats %+v: want each of the %d messages received twice and nacked once", last, n)
	}
}
