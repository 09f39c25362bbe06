package pulsar_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testsize"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// Guarantee: with every handler stalled and a backlog far larger than the
// pipeline may take (BOULEVARD_STALL_RECORDS messages of 4 KiB, 6,000 by
// default: 23 MiB), the heap the running source adds stays within the
// bounds of its options, whatever the backlog. The bound: what the same
// source adds stalled on an empty topic (the client's connection,
// goroutines and pools, measured first); the permit window (the stage
// buffer and the client's receiver queue, which the source counts against
// it), the processor's queue and the message in the handler, at twice the
// message's size each (the payload and what carries it); and that idle
// cost again for what the running client allocates around the collection.
// Each heap is measured once the broker dispatches no more, from a
// baseline taken after the backlog was published. Once the handler
// resumes every message is handled and the pipeline stops.
func TestStalledHandlersKeepTheHeapWithinTheWindowNotTheBacklog(t *testing.T) {
	const (
		size   = 4 << 10
		perMsg = 2 * size // the payload and what carries it (message, metadata, client message)
		window = 10
		idle   = "stall-idle"
		topic  = "stall-heap"
	)
	n := testsize.Count(t, "BOULEVARD_STALL_RECORDS", 1500, 6000)
	e := newEnv(t)
	payload := make([]byte, size)
	msgs := make([]pulsartest.Message, n)
	for i := range msgs {
		msgs[i] = pulsartest.Message{Payload: payload}
	}
	if _, err := e.broker.Publish(context.Background(), topic, msgs...); err != nil {
		t.Fatal(err)
	}
	msgs = nil
	if err := e.broker.CreateTopic(idle, 0); err != nil {
		t.Fatal(err)
	}

	// stall runs a pipeline over topic with its handler stalled until the
	// broker stopped dispatching; it returns what the heap grew by, the
	// pipeline's bound on the messages it holds, and the gate that resumes
	// the handler and the function that stops the pipeline.
	stall := func(topic string, r *received) (grown int64, held int, g *gate, stop func() error) {
		before := wait.LiveHeap()
		src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{topic}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
		g = newGate()
		t.Cleanup(g.open) // before the pipeline stops
		p, stopIt := start(t, pipeline.Options[[]byte, []byte]{
			Name:            "stall-heap",
			Logger:          testLogger(),
			ShutdownTimeout: 10 * time.Second,
			Producer:        producer.Options[[]byte]{Source: src, Concurrency: 1, Flow: producer.Flow{Initial: window}},
			Processors:      processor.Options[[]byte, []byte]{Concurrency: 1, MaxDemand: 1, Handle: recordAfter(g, r)},
		})
		stop = stopIt
		top := p.Topology()
		held = window + top.Processors.QueueCapacity + top.Processors.Concurrency
		wait.Within(t, waitLimit, "the consumer connected", func() bool { return e.connectedCount(topic, "sub", 0) == 1 })
		wait.Stable(t, waitLimit, 500*time.Millisecond, "the broker to stop dispatching", func() string {
			s := e.consumerStats(topic, "sub", 0)
			return fmt.Sprint(s[0].Dispatched, s[0].PermitsGranted)
		})
		return wait.LiveHeap() - before, held, g, stop
	}

	fixed, _, g, stop := stall(idle, newReceived())
	g.open()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	fixed = max(0, fixed)

	r := newReceived()
	grown, held, g, stop := stall(topic, r)
	bound := 2*fixed + int64(held*perMsg)
	s := e.consumerStats(topic, "sub", 0)[0]
	t.Logf("%d messages of %d bytes; %d dispatched; heap grew by %.1f MiB, %.1f MiB idle (bound %.1f MiB, backlog %.1f MiB)",
		n, size, s.Dispatched, mib(grown), mib(fixed), mib(bound), mib(int64(n*size)))
	if grown > bound {
		t.Errorf("with the handler stalled the heap grew by %d bytes over %d messages of %d bytes; bound %d (%d idle)", grown, n, size, bound, fixed)
	}

	g.open()
	wait.Within(t, waitLimit*time.Duration(max(1, n/6000)), "every message handled", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.total >= n
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
