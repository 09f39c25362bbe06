package pulsar_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// redeliveredTo consumes topic with a fresh pipeline and returns the
// redelivery count each message arrives with.
func redeliveredTo(t *testing.T, e *env, topic string, n int) map[string]uint32 {
	t.Helper()
	var (
		mu  sync.Mutex
		got = map[string]uint32{}
	)
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{topic}, Subscription: "sub", Consumer: earliest()})
	_, stop := run(t, src, 1, producer.Flow{}, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		md, _ := message.MetadataAs[*bpulsar.Metadata](m)
		mu.Lock()
		got[string(m.Data)] = md.RedeliveryCount
		mu.Unlock()
		return m.Data, nil
	})
	wait.Within(t, waitLimit, "the messages left unacked to come back", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == n })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return got
}

// A failure the pipeline's shutdown caused (its outcome wraps
// acker.ErrShutdown) is neither acked nor nacked, even when a hook asked
// for DispositionDiscard: the broker keeps it for redelivery, which comes
// when the consumer closes and counts no redelivery against the message.
func TestInterruptedOutcomeIsNeverAcked(t *testing.T) {
	e := newEnv(t)
	want := e.publish("interrupted", "m", 10)
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"interrupted"}, Subscription: "sub", Consumer: earliest()})
	_, stop := run(t, src, 1, producer.Flow{}, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		if string(m.Data) == "m-4" {
			m.SetDisposition(acker.DispositionDiscard)
			return nil, fmt.Errorf("handler cut short: %w", acker.ErrShutdown)
		}
		return m.Data, nil
	})
	wait.Within(t, waitLimit, "every other message acked", func() bool { return e.sumAcked("interrupted", "sub", 0) == int64(len(want)-1) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, c := range e.broker.Consumers("interrupted", "sub") {
		if c.Acked != int64(len(want)-1) || c.Nacked != 0 {
			t.Fatalf("consumer acked %d, nacked %d; want %d acked and the interrupted message neither acked nor nacked", c.Acked, c.Nacked, len(want)-1)
		}
	}
	if n := e.broker.Backlog("interrupted", "sub"); n != 1 {
		t.Fatalf("backlog %d after the stop, want the interrupted message only", n)
	}
	if got := redeliveredTo(t, e, "interrupted", 1); len(got) != 1 {
		t.Fatalf("redelivered %v, want m-4", got)
	} else if n, ok := got["m-4"]; !ok || n != 0 {
		t.Fatalf("redelivered %v, want m-4 with redelivery count 0", got)
	}
}

// End to end: a handler still running when the shutdown timeout passes
// returns its context's error; the pipeline marks the failure as caused by
// the shutdown, and the source leaves the message for redelivery even
// though the handler had asked to discard it on failure.
func TestShutdownCutShortLeavesMessageForRedelivery(t *testing.T) {
	e := newEnv(t)
	e.publish("cutshort", "m", 1)
	started := make(chan struct{})
	var once sync.Once
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:            "cutshort",
		ShutdownTimeout: 200 * time.Millisecond,
		Producer: producer.Options[[]byte]{Source: bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"cutshort"},
			Subscription: "sub", Consumer: earliest()})},
		Processors: processor.Options[[]byte, []byte]{Concurrency: 1, Handle: func(ctx context.Context, m *message.Message[[]byte]) ([]byte, error) {
			m.SetDisposition(acker.DispositionDiscard)
			once.Do(func() { close(started) })
			<-ctx.Done()
			return nil, ctx.Err()
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(waitLimit):
		t.Fatal("the handler never started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_ = p.Stop(ctx) // the shutdown timeout passes with the handler running
	for _, c := range e.broker.Consumers("cutshort", "sub") {
		if c.Acked != 0 || c.Nacked != 0 {
			t.Fatalf("interrupted message acked %d, nacked %d times; want neither", c.Acked, c.Nacked)
		}
	}
	if got := redeliveredTo(t, e, "cutshort", 1); len(got) != 1 {
		t.Fatalf("redelivered %v, want m-0", got)
	}
}
