package pulsar_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"weak"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
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
	msgs := make([]pulsartest.Message, n)
	for i := range msgs {
		msgs[i] = pulsartest.Message{Payload: bytes.Repeat([]byte{byte(i)}, size)}
	}
	if _, err := e.broker.Publish(context.Background(), "large", msgs...); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		payloads []weak.Pointer[byte]
	)
	handle := func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		mu.Lock()
		payloads = append(payloads, weak.Make(&m.Data[0]))
		mu.Unlock()
		return nil, nil
	}
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"large"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	_, stop := run(t, src, 1, producer.Flow{}, handle)
	wait.Within(t, waitLimit, "every message acked", func() bool { return e.sumAcked("large", "sub", 0) == n })
	kept := func() int {
		runtime.GC()
		mu.Lock()
		defer mu.Unlock()
		k := 0
		for _, p := range payloads {
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
