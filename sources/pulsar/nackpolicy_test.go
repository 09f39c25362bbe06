package pulsar_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// constantBackoff is a NackBackoffPolicy that returns the same delay for
// every redelivery count.
type constantBackoff time.Duration

func (c constantBackoff) Next(uint32) time.Duration { return time.Duration(c) }

// panickingBackoff is a NackBackoffPolicy that panics on every call, and
// counts them.
type panickingBackoff struct{ calls atomic.Int64 }

func (p *panickingBackoff) Next(uint32) time.Duration {
	p.calls.Add(1)
	panic("backoff policy out of order")
}

// failOnce is a handler that fails the first delivery of every message and
// succeeds on the next; it records how many times it saw each.
func failOnce(mu *sync.Mutex, seen map[string]int) processor.Handler[[]byte, []byte] {
	return func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		seen[string(m.Data)]++
		if seen[string(m.Data)] == 1 {
			return nil, errors.New("first delivery fails")
		}
		return m.Data, nil
	}
}

// Guarantee: a NackBackoffPolicy that returns a delay below the client's
// tick (zero or negative) neither crashes the process nor stops
// redelivery: every nacked message comes back and is then acked.
func TestNackBackoffPolicyBelowAMillisecondKeepsTheProcessAndRedelivers(t *testing.T) {
	for _, d := range []time.Duration{0, -1} {
		t.Run(fmt.Sprintf("delay %v", d), func(t *testing.T) {
			e := newEnv(t)
			topic := fmt.Sprintf("tiny-backoff-%d", d)
			want := e.publish(topic, "m", 10)
			var mu sync.Mutex
			seen := map[string]int{}
			co := earliest()
			co.NackBackoffPolicy = constantBackoff(d)
			src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{topic}, Subscription: "sub", Consumer: co})
			_, stop := run(t, src, 1, producer.Flow{}, failOnce(&mu, seen))
			wait.Within(t, waitLimit, "every message nacked, redelivered and acked",
				func() bool { return e.sumAcked(topic, "sub", 0) == int64(len(want)) })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, w := range want {
				if seen[w] != 2 {
					t.Errorf("%s handled %d times, want 2 (failed, then redelivered)", w, seen[w])
				}
			}
		})
	}
}

// Guarantee: a NackBackoffPolicy that panics neither crashes the process
// nor stops redelivery: each panic is one error line on the stage's
// logger, and the message comes back after the consumer's
// NackRedeliveryDelay instead.
func TestNackBackoffPolicyPanicIsLoggedAndTheNackDelayApplies(t *testing.T) {
	e := newEnv(t)
	want := e.publish("panicking-backoff", "m", 5)
	var mu sync.Mutex
	seen := map[string]int{}
	policy := &panickingBackoff{}
	co := earliest()
	// Without it the client's default, one minute, would outlast waitLimit.
	co.NackRedeliveryDelay = 100 * time.Millisecond
	co.NackBackoffPolicy = policy
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"panicking-backoff"}, Subscription: "sub", Consumer: co})
	logs := newRecords()
	_, stop := start(t, pipeline.Options[[]byte, []byte]{
		Name:            "pulsar-test",
		Logger:          slog.New(logs),
		ShutdownTimeout: 10 * time.Second,
		Producer:        producer.Options[[]byte]{Source: src},
		Processors:      processor.Options[[]byte, []byte]{Handle: failOnce(&mu, seen)},
	})
	wait.Within(t, waitLimit, "every message nacked, redelivered and acked",
		func() bool { return e.sumAcked("panicking-backoff", "sub", 0) == int64(len(want)) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// One call when the consumer is made, one per nack.
	calls := policy.calls.Load()
	if calls < int64(len(want)) {
		t.Errorf("the policy was called %d times, want at least once per nack (%d)", calls, len(want))
	}
	var lines int64
	for _, l := range logs.snapshot() {
		if l.msg != "pulsar NackBackoffPolicy panicked; the nack redelivery delay applies" {
			continue
		}
		lines++
		if l.level != slog.LevelError || !hasAttr(l, "panic") || !hasAttr(l, "topic") {
			t.Errorf("the panic's line is not an error naming the topic and the panic: %s", l.text)
		}
	}
	if lines != calls {
		t.Errorf("%d panics logged in %d lines, want one line each", calls, lines)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, w := range want {
		if seen[w] != 2 {
			t.Errorf("%s handled %d times, want 2 (failed, then redelivered)", w, seen[w])
		}
	}
}

// hasAttr reports whether l has an attribute named key.
func hasAttr(l logged, key string) bool {
	for _, a := range l.attrs {
		if a.Key == key {
			return true
		}
	}
	return false
}

// Guarantee: with the client's default nack backoff
// (EnableDefaultNackBackoffPolicy), a message nacked after very many
// redeliveries waits the backoff's ceiling, 10 minutes, before it comes
// back, however large its redelivery count: a count of 34 does not bring
// it back on the client's next tick (pulsar-client-go's own policy
// overflows into a negative delay there).
func TestDefaultNackBackoffWaitsItsCeilingAtAHugeRedeliveryCount(t *testing.T) {
	const topic = "huge-redelivery-count"
	e := newEnv(t)
	ids, err := e.broker.Publish(context.Background(), topic, pulsartest.Message{Payload: []byte("poison")})
	if err != nil {
		t.Fatal(err)
	}
	counts := make(chan uint32, 16)
	co := earliest()
	co.EnableDefaultNackBackoffPolicy = true
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{topic}, Subscription: "sub", Consumer: co})
	_, stop := run(t, src, 1, producer.Flow{}, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		md, _ := message.MetadataAs[*bpulsar.Metadata](m)
		if md.RedeliveryCount == 0 {
			// As if the broker had redelivered it 33 times already: the
			// redelivery this nack asks for makes it 34.
			if err := e.broker.SetRedeliveryCount(topic, "sub", ids[0], 33); err != nil {
				t.Error(err)
			}
		}
		select {
		case counts <- md.RedeliveryCount:
		default:
		}
		return nil, errors.New("poison message")
	})
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	for _, want := range []uint32{0, 34} {
		select {
		case got := <-counts:
			if got != want {
				t.Fatalf("delivered with redelivery count %d, want %d", got, want)
			}
		case <-time.After(waitLimit):
			t.Fatalf("no delivery with redelivery count %d within %v", want, waitLimit)
		}
	}
	// The client redelivers on a tick of a third of the backoff's second
	// delay (2s); a negative delay would bring the message back on the
	// next one. Four ticks of absence tell a wait of 10 minutes from that.
	select {
	case got := <-counts:
		t.Fatalf("nacked at redelivery count 34, the message came back at once (count %d) instead of after 10 minutes", got)
	case <-time.After(3 * time.Second):
	}
}
