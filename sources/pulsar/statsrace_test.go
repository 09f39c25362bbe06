package pulsar_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// Guarantee: a source's Stats may be read from several goroutines while
// its consumers, one per topic, deliver messages and while the source
// stops and closes them (run with -race); once it stopped, they count
// every message received and acked, and no consumer left.
func TestStatsMayBeReadWhileMessagesFlowAndTheSourceStops(t *testing.T) {
	const n, pollers = 100, 3
	e := newEnv(t)
	topics := []string{"stats-stop-a", "stats-stop-b"}
	for _, tp := range topics {
		e.publish(tp, "m", n)
	}
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: topics, Subscription: "sub", Consumer: earliest()})

	done := make(chan struct{})
	var polling sync.WaitGroup
	for range pollers {
		polling.Go(func() {
			for {
				if st := src.Stats(); st.Acked > st.Received || st.Consumers < 0 || st.Consumers > len(topics) {
					panic(fmt.Sprintf("Stats %+v: more acked than received, or consumers that never were", st))
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	_, stop := run(t, src, 1, producer.Flow{}, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) { return m.Data, nil })
	wait.Within(t, waitLimit, "every message acked", func() bool { return src.Stats().Acked == int64(len(topics)*n) },
		func() string { return fmt.Sprintf("Stats %+v", src.Stats()) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	close(done)
	polling.Wait()
	if st := src.Stats(); st.Received != int64(len(topics)*n) || st.Acked != st.Received || st.Consumers != 0 {
		t.Fatalf("Stats once the source stopped = %+v, want %d received and acked, no consumer", st, len(topics)*n)
	}
}
