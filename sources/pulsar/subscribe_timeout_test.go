package pulsar_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
)

// Guarantee: a stage whose client does not return from subscribing fails
// after Options.SubscribeTimeout with an error wrapping ErrSubscribe,
// ErrSubscribeTimeout and context.DeadlineExceeded, and the restarted stage subscribes a new consumer
// and receives; Stats counts the call left behind; Close does not wait for
// it; and a consumer the call returns later is closed, not left
// subscribed.
func TestAStageWhoseClientNeverReturnsFromSubscribingFailsAndSubscribesAgain(t *testing.T) {
	e := newEnv(t)
	hc := testbroker.HangSubscribe(e.client, func(pulsar.ConsumerOptions) bool { return true })
	t.Cleanup(hc.Release)
	want := e.publish("hung-subscribe", "m", 20)
	recs := newRecords()
	r := newReceived()
	// The timeout also bounds the restarted stage's subscribe, which must
	// not be abandoned: long enough for a lookup and a subscribe on a busy
	// machine.
	src := bpulsar.New(bpulsar.Options{Client: hc, Topics: []string{"hung-subscribe"}, Subscription: "sub",
		Consumer: earliest(), SubscribeTimeout: 2 * time.Second})
	_, stop := start(t, pipeline.Options[[]byte, []byte]{
		Name:   "hung-subscribe",
		Logger: slog.New(recs),
		Producer: producer.Options[[]byte]{Source: src,
			Restart: producer.Restart{MaxRestarts: 10, Window: time.Minute, Backoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond}},
		Processors: processor.Options[[]byte, []byte]{Handle: recordAll(r)},
	})
	<-hc.Began
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
	if !errors.Is(err, bpulsar.ErrSubscribe) || !errors.Is(err, bpulsar.ErrSubscribeTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stage failed with %v, want an error wrapping ErrSubscribe, ErrSubscribeTimeout and context.DeadlineExceeded", err)
	}
	if n := src.Stats().SubscribesAbandoned; n != 1 {
		t.Errorf("Stats().SubscribesAbandoned = %d, want 1", n)
	}
	if err := stop(); err != nil {
		t.Fatalf("Stop with a subscribe call still hanging: %v", err)
	}
	hc.CloseWhileHung(t, src.Close, waitLimit)
	if n := len(connected(e, "hung-subscribe", "sub")); n != 0 {
		t.Fatalf("%d consumers connected after Close, want 0", n)
	}
	hc.ReleaseAndWaitClosed(t, e.broker, "hung-subscribe", "sub", waitLimit)
}
