package pulsar_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
)

// hangingClient is a client whose first Subscribe does not return until
// released, as pulsar-client-go's does when it deadlocks; it then
// subscribes for real. Later calls subscribe at once.
type hangingClient struct {
	pulsar.Client
	first    chan struct{} // closed when the first call begins
	release  chan struct{}
	returned chan struct{} // closed when the first call returned
	calls    chan struct{} // one token: the first call takes it
}

func newHangingClient(c pulsar.Client) *hangingClient {
	h := &hangingClient{Client: c, first: make(chan struct{}), release: make(chan struct{}),
		returned: make(chan struct{}), calls: make(chan struct{}, 1)}
	h.calls <- struct{}{}
	return h
}

func (h *hangingClient) Subscribe(o pulsar.ConsumerOptions) (pulsar.Consumer, error) {
	select {
	case <-h.calls:
	default:
		return h.Client.Subscribe(o)
	}
	defer close(h.returned)
	close(h.first)
	<-h.release
	return h.Client.Subscribe(o)
}

// Guarantee: a stage whose client does not return from subscribing fails
// after Options.SubscribeTimeout with an error wrapping ErrSubscribe and
// ErrSubscribeTimeout, and the restarted stage subscribes a new consumer
// and receives; Stats counts the call left behind; Close does not wait for
// it; and a consumer the call returns later is closed, not left
// subscribed.
func TestAStageWhoseClientNeverReturnsFromSubscribingFailsAndSubscribesAgain(t *testing.T) {
	e := newEnv(t)
	hc := newHangingClient(e.client)
	released := false
	t.Cleanup(func() {
		if !released {
			close(hc.release)
		}
	})
	want := e.publish("hung-subscribe", "m", 20)
	recs := newRecords()
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: hc, Topics: []string{"hung-subscribe"}, Subscription: "sub",
		Consumer: earliest(), SubscribeTimeout: 300 * time.Millisecond})
	_, stop := start(t, pipeline.Options[[]byte, []byte]{
		Name:   "hung-subscribe",
		Logger: slog.New(recs),
		Producer: producer.Options[[]byte]{Source: src,
			Restart: producer.Restart{MaxRestarts: 10, Window: time.Minute, Backoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond}},
		Processors: processor.Options[[]byte, []byte]{Handle: recordAll(r)},
	})
	<-hc.first
	wait.Within(t, waitLimit, "every message received by the restarted stage", func() bool { return r.distinct() == len(want) })
	l, ok := recs.first(slog.LevelWarn, "source failed; restarting")
	if !ok {
		t.Fatalf("no restart logged; logged: %v", recs.snapshot())
	}
	var err error
	for _, a := range l.attrs {
		if e, ok := a.Value.Any().(error); ok && a.Key == "error" {
			err = e
		}
	}
	if !errors.Is(err, bpulsar.ErrSubscribe) || !errors.Is(err, bpulsar.ErrSubscribeTimeout) {
		t.Errorf("stage failed with %v, want an error wrapping ErrSubscribe and ErrSubscribeTimeout", err)
	}
	if n := src.Stats().SubscribesAbandoned; n != 1 {
		t.Errorf("Stats().SubscribesAbandoned = %d, want 1", n)
	}
	if err := stop(); err != nil {
		t.Fatalf("Stop with a subscribe call still hanging: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := src.Close(ctx); err != nil {
		t.Fatalf("Close with a subscribe call still hanging: %v", err)
	}
	if n := len(connected(e, "hung-subscribe", "sub")); n != 0 {
		t.Fatalf("%d consumers connected after Close, want 0", n)
	}
	before := len(e.broker.Consumers("hung-subscribe", "sub"))
	released = true
	close(hc.release)
	<-hc.returned
	wait.Within(t, waitLimit, "the consumer the abandoned call returned, subscribed and closed", func() bool {
		return len(e.broker.Consumers("hung-subscribe", "sub")) == before+1 && len(connected(e, "hung-subscribe", "sub")) == 0
	})
}
