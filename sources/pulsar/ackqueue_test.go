package pulsar_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
)

// ackEachAtOnce is the consumer option with which every ack goes through
// the client's event loop (no grouping), which does not run while the
// client reconnects the consumer.
func ackEachAtOnce() pulsar.ConsumerOptions {
	co := earliest()
	co.AckGroupingOptions = &pulsar.AckGroupingOptions{MaxSize: 1}
	return co
}

// reconnecting starts a pipeline over topic whose handlers wait at a gate,
// waits for the stage to hold its share of the window, then makes the
// broker refuse the subscription and drops the connections, so that the
// client reconnects the consumer for as long as the test wants. It returns
// the pipeline, the source, what the handlers recorded, the gate, and the
// number of messages the handlers have returned from.
func reconnecting(t *testing.T, e *env, topic string) (*pipeline.Pipeline[[]byte, []byte], *bpulsar.Source, *received, *gate, *atomic.Int64) {
	t.Helper()
	r := newReceived()
	g := newGate()
	var handled atomic.Int64
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{topic}, Subscription: "sub", Consumer: ackEachAtOnce()})
	p, _ := start(t, pipeline.Options[[]byte, []byte]{
		Name:            "ack-reconnect",
		Logger:          testLogger(),
		ShutdownTimeout: 10 * time.Second,
		Producer:        producer.Options[[]byte]{Source: src},
		Processors: processor.Options[[]byte, []byte]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
			<-g.ch
			r.add(m)
			handled.Add(1)
			return m.Data, nil
		}},
	})
	wait.Within(t, waitLimit, "the stage to hold its share of the window", func() bool { return src.Stats().Received >= 51 })
	e.broker.RefuseSubscribe(topic, "sub", errors.New("the test keeps the consumer reconnecting"))
	t.Cleanup(func() { e.broker.RefuseSubscribe(topic, "sub", nil) })
	e.broker.DropConnections()
	wait.Within(t, waitLimit, "the consumer to be disconnected", func() bool { return len(connected(e, topic, "sub")) == 0 })
	return p, src, r, g, &handled
}

// Guarantee: while the client reconnects a consumer whose acks go through
// its event loop one by one (AckGroupingOptions.MaxSize 1), the processors
// handle every message the stage delivered, their outcomes never holding
// them; once the consumer is connected again, every message is handled and
// acknowledged at the broker (those whose acks could not be sent are
// redelivered): none is lost.
func TestProcessorsKeepHandlingWhileTheConsumerReconnects(t *testing.T) {
	const total = 300
	e := newEnv(t)
	e.publish("ack-reconnect", "m", total)
	_, src, r, g, handled := reconnecting(t, e, "ack-reconnect")
	g.open()
	wait.Within(t, waitLimit, "the processors to handle every message delivered while the consumer reconnects",
		func() bool { return handled.Load() == src.Stats().Received },
		func() string {
			return "handled " + itoa(handled.Load()) + " of " + itoa(src.Stats().Received) + " delivered"
		})

	e.broker.RefuseSubscribe("ack-reconnect", "sub", nil)
	wait.Within(t, waitLimit, "every message handled and acknowledged after the reconnection",
		func() bool { return r.distinct() == total && e.broker.Backlog("ack-reconnect", "sub") == 0 },
		func() string {
			return "handled " + itoa(r.distinct()) + " distinct, backlog " + itoa(e.broker.Backlog("ack-reconnect", "sub"))
		})
}

// Guarantee: a Stop while the client reconnects a consumer whose acks go
// through its event loop one by one returns by its deadline with every
// processor done and the source closed (the client's calls still waiting
// are given up, no goroutine left behind); what was not acknowledged is
// delivered to the next consumer of the subscription: none is lost.
func TestStopDuringAReconnectWithAcksWaitingReturnsByItsDeadline(t *testing.T) {
	const total = 300
	e := newEnv(t)
	e.publish("ack-stop", "m", total)
	p, src, r, g, handled := reconnecting(t, e, "ack-stop")
	g.open()
	// More outcomes than the client's event loop queues (10).
	wait.Within(t, waitLimit, "the processors to handle more than ten messages", func() bool { return handled.Load() > 20 },
		func() string { return "handled " + itoa(handled.Load()) })

	const deadline = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	began := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- p.Stop(ctx) }()
	select {
	case err := <-stopped:
		t.Logf("Stop returned after %v; %+v", time.Since(began).Round(time.Millisecond), src.Stats())
		if err != nil {
			t.Errorf("Stop during the reconnection after %v: %v", time.Since(began).Round(time.Millisecond), err)
		}
	case <-time.After(deadline + 5*time.Second):
		t.Fatalf("Stop during the reconnection still runs %v after its %v deadline", 5*time.Second, deadline)
	}
	closeCtx, cancelClose := context.WithTimeout(context.Background(), waitLimit)
	defer cancelClose()
	if err := src.Close(closeCtx); err != nil {
		t.Errorf("Close after the stop: %v", err)
	}

	e.broker.RefuseSubscribe("ack-stop", "sub", nil)
	next := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"ack-stop"}, Subscription: "sub", Consumer: earliest()})
	run(t, next, 1, producer.Flow{}, recordAll(r))
	wait.Within(t, waitLimit, "every message handled and acknowledged by the next consumer",
		func() bool { return r.distinct() == total && e.broker.Backlog("ack-stop", "sub") == 0 },
		func() string {
			return "handled " + itoa(r.distinct()) + " distinct, backlog " + itoa(e.broker.Backlog("ack-stop", "sub"))
		})
}

func itoa[N int | int64](n N) string { return strconv.FormatInt(int64(n), 10) }
