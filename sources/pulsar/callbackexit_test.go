package pulsar_test

import (
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
)

// Guarantee: an active-state callback that ends its goroutine
// (runtime.Goexit, as t.FailNow does) ends neither the client's
// connection goroutine nor the stage's: the exit is logged once per call
// at error level on the stage's logger, and the consumer keeps receiving.
func TestAnActiveStateCallbackThatEndsItsGoroutineLeavesTheConsumerRunning(t *testing.T) {
	e := newEnv(t)
	e.publish("fo-exit", "x", 1) // create the topic
	logs := &logtest.Records{}
	var calls atomic.Int32
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"fo-exit"}, Subscription: "sub",
		SubscriptionType: bpulsar.Failover, Consumer: earliest(), Logger: testLogger(),
		ActiveStateCallback: func(bpulsar.ActiveState) {
			calls.Add(1)
			runtime.Goexit()
		}})
	r := newReceived()
	_, stop := start(t, pipeline.Options[[]byte, []byte]{Name: "fo-exit", Logger: slog.New(logs), ShutdownTimeout: 10 * time.Second,
		Producer:   producer.Options[[]byte]{Source: src},
		Processors: processor.Options[[]byte, []byte]{Handle: recordAll(r)}})
	wait.Within(t, waitLimit, "the callback to be called", func() bool { return calls.Load() > 0 })
	e.publish("fo-exit", "after", 20)
	wait.Within(t, waitLimit, "the consumer to handle the messages", func() bool { return r.distinct() >= 21 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got, want := logs.Count(slog.LevelError, bpulsar.CallbackExitedLog), int(calls.Load()); got != want {
		t.Errorf("%d error lines %q for %d calls that exited, want one each", got, bpulsar.CallbackExitedLog, want)
	}
}

// exitingClient is a pulsar.Client whose TopicPartitions ends its
// goroutine (runtime.Goexit, as t.FailNow does in a fake client); its
// other methods are the wrapped client's.
type exitingClient struct {
	pulsar.Client
	calls atomic.Int32
}

func (c *exitingClient) TopicPartitions(string) ([]string, error) {
	c.calls.Add(1)
	runtime.Goexit()
	return nil, nil
}

// Guarantee: a client whose subscribe ends its goroutine
// (runtime.Goexit) fails that subscribe at once, a *ConsumerError of
// ErrSubscribe the stage restarts from, instead of leaving the stage
// waiting for SubscribeTimeout; Stop returns.
func TestASubscribeThatEndsItsGoroutineFailsAtOnce(t *testing.T) {
	e := newEnv(t)
	client := &exitingClient{Client: e.client}
	src := bpulsar.New(bpulsar.Options{Client: client, Topics: []string{"sub-exit"}, Subscription: "sub",
		SubscribeTimeout: time.Hour, Logger: testLogger()})
	p, stop := start(t, pipeline.Options[[]byte, []byte]{Name: "sub-exit", Logger: testLogger(), ShutdownTimeout: 10 * time.Second,
		Producer:   producer.Options[[]byte]{Source: src, Restart: producer.Restart{Backoff: time.Millisecond}},
		Processors: processor.Options[[]byte, []byte]{Handle: recordAll(newReceived())}})
	wait.Within(t, waitLimit, "a subscribe to fail", func() bool {
		st := p.SourceStatus()
		return len(st) == 1 && st[0].LastError != nil
	})
	err := p.SourceStatus()[0].LastError
	var ce *bpulsar.ConsumerError
	if !errors.As(err, &ce) || !errors.Is(err, bpulsar.ErrSubscribe) || errors.Is(err, bpulsar.ErrSubscribeTimeout) {
		t.Fatalf("the stage's last error is %v, want a *ConsumerError of ErrSubscribe that did not time out", err)
	}
	if !strings.Contains(err.Error(), "runtime.Goexit") {
		t.Errorf("the stage's last error %q does not say the call ended its goroutine", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
