package pulsar_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// Guarantee: the source keeps no large payload once its message is done:
// while the pipeline runs on, idle, the garbage collector frees the
// payloads of the messages handled and acknowledged.
func TestLargePayloadsAreFreedOnceTheirMessagesAreDone(t *testing.T) {
	e := newEnv(t)
	const n, size = 20, 64 << 10
	w, handle := e.publishWatched("large", n, size)
	mu, payloads := &w.mu, &w.payloads
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"large"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	_, stop := run(t, src, 1, producer.Flow{}, handle)
	wait.Within(t, waitLimit, "every message acked", func() bool { return e.sumAcked("large", "sub", 0) == n })
	kept := func() int {
		runtime.GC()
		mu.Lock()
		defer mu.Unlock()
		k := 0
		for _, p := range *payloads {
			if p.Value() != nil {
				k++
			}
		}
		return k
	}
	wait.Within(t, waitLimit, "every payload of a done message freed", func() bool { return kept() == 0 },
		func() string { return fmt.Sprintf("%d of %d payloads of %d bytes still reachable", kept(), n, size) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// Guarantee: the payloads of small messages (1 KiB or less, carved from
// the consumer's slabs) are freed once their messages are done, but for
// those the consumer's current blocks still hold: at most a block of
// messages (93) and one of metadata (64), as the source documents.
func TestSmallPayloadsAreFreedOnceTheirMessagesAreDoneButForTheCurrentBlocks(t *testing.T) {
	e := newEnv(t)
	const n, size, bound = 1000, 512, 93 + 64
	e.publishSized("small", n, size)
	var (
		mu       sync.Mutex
		payloads []weak.Pointer[byte]
	)
	handle := watchPayloads(&mu, &payloads)
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"small"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	_, stop := run(t, src, 1, producer.Flow{}, handle)
	wait.Within(t, waitLimit, "every message acked", func() bool { return e.sumAcked("small", "sub", 0) == n })
	mu.Lock()
	live := wait.Reachable(payloads)
	mu.Unlock()
	if live > bound {
		t.Errorf("%d of %d payloads of done messages still reachable, want at most %d", live, n, bound)
	}
	t.Logf("%d of %d payloads still reachable", live, n)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// publishSized stores n unbatched messages of size bytes on topic, the
// bytes of the i-th all i (mod 256).
func (e *env) publishSized(topic string, n, size int) {
	e.t.Helper()
	msgs := make([]pulsartest.Message, n)
	for i := range msgs {
		msgs[i] = pulsartest.Message{Payload: bytes.Repeat([]byte{byte(i)}, size)}
	}
	if _, err := e.broker.Publish(context.Background(), topic, msgs...); err != nil {
		e.t.Fatal(err)
	}
}

// watched is what a handler of publishWatched saw: a weak pointer to the
// payload of each delivery, under mu.
type watched struct {
	mu       sync.Mutex
	payloads []weak.Pointer[byte]
}

// publishWatched publishes n messages of size bytes on topic
// (publishSized) and returns a handler that watches the payloads it sees
// (watchPayloads) in w.
func (e *env) publishWatched(topic string, n, size int) (w *watched, handle processor.Handler[[]byte, []byte]) {
	e.t.Helper()
	e.publishSized(topic, n, size)
	w = &watched{}
	return w, watchPayloads(&w.mu, &w.payloads)
}

// watchPayloads is a handler that appends a weak pointer to each payload
// it sees to payloads, under mu.
func watchPayloads(mu *sync.Mutex, payloads *[]weak.Pointer[byte]) processor.Handler[[]byte, []byte] {
	return func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		mu.Lock()
		*payloads = append(*payloads, weak.Make(&m.Data[0]))
		mu.Unlock()
		return nil, nil
	}
}

// Guarantee: the source keeps no payload of a message it nacked, neither
// of the failed delivery nor of the redelivery, once the redelivery is
// handled and acked; nor of a message a hook discarded (acked without
// being handled) once it is acked.
func TestPayloadsOfNackedAndDiscardedMessagesAreFreedOnceAcked(t *testing.T) {
	e := newEnv(t)
	const n, size = 20, 64 << 10
	w, watch := e.publishWatched("nacked", n, size)
	mu, seen := &w.mu, map[byte]int{}
	handle := func(ctx context.Context, m *message.Message[[]byte]) ([]byte, error) {
		_, _ = watch(ctx, m)
		mu.Lock()
		defer mu.Unlock()
		i := m.Data[0]
		seen[i]++
		switch {
		case i%4 == 0:
			m.SetDisposition(acker.DispositionDiscard)
			return nil, errors.New("discarded")
		case seen[i] == 1:
			return nil, errors.New("first delivery fails")
		}
		return nil, nil
	}
	co := earliest()
	co.NackRedeliveryDelay = 50 * time.Millisecond
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"nacked"}, Subscription: "sub", Consumer: co, Logger: testLogger()})
	_, stop := run(t, src, 1, producer.Flow{}, handle)
	wait.Within(t, waitLimit, "every message acked", func() bool { return e.sumAcked("nacked", "sub", 0) == n })
	mu.Lock()
	if want := n + n - n/4; len(w.payloads) != want {
		t.Errorf("%d deliveries, want %d (each message not discarded twice)", len(w.payloads), want)
	}
	live := wait.Reachable(w.payloads)
	mu.Unlock()
	if live > 0 {
		t.Errorf("%d of %d payloads of %d bytes still reachable once every message was acked", live, len(w.payloads), size)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
