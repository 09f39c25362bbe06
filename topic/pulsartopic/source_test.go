package pulsartopic_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// Guarantee: a pipeline reading a Pulsar topic through topic/source settles
// each message with the broker: a handled message is acked (the group's
// backlog empties) and a failed one is nacked and handled again.
func TestSourceSettlesWithBroker(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	h := newHandle(t, be, "in", topic.Options{})
	src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("readers"), Logger: testbroker.PulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	const n, failing = 50, 7
	var mu sync.Mutex
	handled := make(map[int]int)
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:     "from-pulsar",
		Logger:   testbroker.PulsarLogger(),
		Producer: producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			handled[m.Data]++
			if m.Data == failing && handled[m.Data] == 1 {
				return 0, errors.New("first attempt fails")
			}
			return m.Data, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := h.Publish(ctxT(t), i); err != nil {
			t.Fatal(err)
		}
	}
	wait.Within(t, patience, "every message handled and acked on the broker", func() bool {
		mu.Lock()
		all := len(handled) == n && handled[failing] >= 2
		mu.Unlock()
		return all && b.Backlog(be.TopicName("in"), "readers") == 0
	})
	if err := p.Stop(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for v, k := range handled {
		if k != 1 && v != failing {
			t.Fatalf("message %d handled %d times", v, k)
		}
	}
}

// Guarantee: a message that fails on every delivery carries how many times
// it was delivered before (source.Metadata.Redeliveries), so that a
// HandleFailed can give up on it after a few attempts: once it sets
// acker.DispositionDiscard, the source acks the message and the broker
// delivers it no more.
func TestHandleFailedGivesUpAfterAFewRedeliveries(t *testing.T) {
	b := testbroker.Pulsar(t)
	o := testOptions[int](b, topic.IntCodec{})
	o.NackRedeliveryDelay = 10 * time.Millisecond
	be := newBackend(t, o)
	h := newHandle(t, be, "poison", topic.Options{})
	src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("readers"), Logger: testbroker.PulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	const poison, giveUpAfter = 3, 2
	var mu sync.Mutex
	var seen []uint32 // the poison's Redeliveries, delivery by delivery
	handled := map[int]int{}
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:     "gives-up",
		Logger:   testbroker.PulsarLogger(),
		Producer: producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{Concurrency: 2,
			Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				handled[m.Data]++
				if m.Data == poison {
					md, _ := message.MetadataAs[*source.Metadata](m)
					seen = append(seen, md.Redeliveries)
					return 0, errors.New("always fails")
				}
				return m.Data, nil
			},
			HandleFailed: func(_ context.Context, failed []*message.Message[int]) {
				for _, m := range failed {
					if md, ok := message.MetadataAs[*source.Metadata](m); ok && md.Redeliveries >= giveUpAfter {
						m.SetDisposition(acker.DispositionDiscard)
					}
				}
			}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := h.Publish(ctxT(t), i); err != nil {
			t.Fatal(err)
		}
	}
	wait.Within(t, patience, "every message settled on the broker", func() bool {
		mu.Lock()
		n := len(handled)
		mu.Unlock()
		return n == 5 && b.Backlog(be.TopicName("poison"), "readers") == 0
	})
	if err := p.Stop(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []uint32{0, 1, 2}; !slices.Equal(seen, want) {
		t.Fatalf("the failing message was delivered with Redeliveries %v, want %v and then let go", seen, want)
	}
}

// Guarantee: a pipeline whose topic source's stage is subscribing when it
// is stopped, to a Pulsar topic whose client never returns from that
// subscribe, stops by its deadline, long before Options.SubscribeTimeout:
// the stage's context bounds the subscribe, so the source's closing does
// not wait for it. Nothing is left subscribed once the client returns,
// and no goroutine is left (TestMain's goleak).
func TestAPipelineStoppedWhileItsTopicSourceSubscribesStopsByItsDeadline(t *testing.T) {
	const timeout = 10 * time.Minute
	br := testbroker.Pulsar(t)
	var calls atomic.Int32
	// The second subscribe of group "readers", the second stage's, hangs.
	hc := testbroker.HangPulsarSubscribe(t, br, func(co pulsar.ConsumerOptions) bool {
		return co.SubscriptionName == "readers" && calls.Add(1) == 2
	})
	be := hungBackend(t, br, hc, timeout)
	h := newHandle(t, be, "in", topic.Options{})
	src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("readers"), Logger: testbroker.PulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:     "hung-subscribe",
		Logger:   testbroker.PulsarLogger(),
		Producer: producer.Options[int]{Source: src, Concurrency: 2},
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			return m.Data, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hc.Began:
	case <-time.After(patience):
		t.Fatal("the second stage never began subscribing")
	}
	const deadline = 5 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	began := time.Now()
	err = p.Stop(ctx)
	elapsed := time.Since(began)
	if err != nil {
		t.Errorf("Stop while a stage subscribes = %v, want nil", err)
	}
	if elapsed >= deadline {
		t.Errorf("Stop returned after %v, want within its deadline (%v; SubscribeTimeout %v)", elapsed, deadline, timeout)
	}
	hc.ReleaseAndWaitClosed(t, br, be.TopicName("in"), "readers", patience)
}

// Guarantee: source.NewContext, on a Pulsar topic whose client never
// returns from subscribing, returns once its context is cancelled, long
// before Options.SubscribeTimeout, with an error wrapping
// context.Canceled and no source; the consumer the client makes once it
// returns is closed.
func TestNewContextReturnsWhenItsContextEndsWhileTheClientSubscribes(t *testing.T) {
	const timeout = 10 * time.Minute
	br := testbroker.Pulsar(t)
	hc := testbroker.HangPulsarSubscribe(t, br, func(co pulsar.ConsumerOptions) bool { return co.SubscriptionName == "readers" })
	be := hungBackend(t, br, hc, timeout)
	h := newHandle(t, be, "in", topic.Options{})
	src, err := cancelWhileHung(t, hc, "NewContext", timeout, func(ctx context.Context) (*source.Source[int], error) {
		return source.NewContext(ctx, source.Options[int]{Topic: h, Mode: topic.Balanced("readers"), Logger: testbroker.PulsarLogger()})
	})
	if src != nil {
		_ = src.Close(ctxT(t))
		t.Error("NewContext returned a source once its context was cancelled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("NewContext with its context cancelled = %v, want an error wrapping context.Canceled", err)
	}
	hc.ReleaseAndWaitClosed(t, br, be.TopicName("in"), "readers", patience)
}
