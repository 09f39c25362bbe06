package pulsar_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// patientClient is a client on e's broker whose operation timeout (a
// minute) is far longer than testbroker.HungDeadline: a call that waits
// for a withheld answer instead of its context shows.
func (e *env) patientClient() pulsar.Client {
	e.t.Helper()
	cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: e.broker.URL(), OperationTimeout: time.Minute, Logger: quietLogger()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cl.Close)
	return cl
}

// Guarantee: Close returns by its context's deadline, with an error
// wrapping context.DeadlineExceeded, while the broker does not answer the
// close of a consumer: the client's close request, bounded only by its
// OperationTimeout (here far longer), is left to finish in the background
// and a later Close waits for it.
func TestCloseReturnsByItsDeadlineWhileTheBrokerWithholdsTheConsumerClose(t *testing.T) {
	e := newEnv(t)
	cl := e.patientClient()
	want := e.publish("hung-close", "m", 1)
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: cl, Topics: []string{"hung-close"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	run(t, src, 1, producer.Flow{}, recordAll(r))
	wait.Within(t, waitLimit, "the message handled", func() bool { return r.distinct() == len(want) })
	release := e.broker.Withhold(pulsartest.CommandCloseConsumer)
	t.Cleanup(release) // before the pipeline stops
	testbroker.ReturnsByDeadline(t, "Close", src.Close)
}

// Guarantee: a stage that failed returns from Run once its context ends
// while the broker does not answer the close of the consumers it retires
// (one topic subscribed, the other refused): Stop returns by its deadline
// with no producer stage left running, the close goes on in the
// background, and a later Close waits for it.
func TestStopReturnsByItsDeadlineWhileTheBrokerWithholdsARetiredConsumersClose(t *testing.T) {
	e := newEnv(t)
	cl := e.patientClient()
	release := e.broker.Withhold(pulsartest.CommandCloseConsumer)
	t.Cleanup(release) // before the pipeline stops
	e.broker.RefuseSubscribe("retired-b", "sub", errors.New("not now"))
	src := bpulsar.New(bpulsar.Options{Client: cl, Topics: []string{"retired-a", "retired-b"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	p, _ := start(t, pipeline.Options[[]byte, []byte]{
		Name:       "retired",
		Logger:     testLogger(),
		Producer:   producer.Options[[]byte]{Source: src},
		Processors: processor.Options[[]byte, []byte]{Handle: recordAll(newReceived())},
	})
	wait.Within(t, waitLimit, "the retired consumer's close withheld", func() bool {
		st := e.broker.Stats()
		return st.SubscribesRefused > 0 && st.Withheld > 0
	})
	stopLeavingNoProducerStage(t, p, "with a retired consumer's close withheld")
	release()
	closeCtx, cancelClose := context.WithTimeout(context.Background(), waitLimit)
	defer cancelClose()
	if err := src.Close(closeCtx); err != nil {
		t.Errorf("Close once the broker answers: %v", err)
	}
}

// Guarantee: Close with a context that has ended reports it, even with
// nothing left to wait for: the caller learns its deadline passed.
func TestCloseReportsAContextThatEnded(t *testing.T) {
	e := newEnv(t)
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"idle"}, Subscription: "sub", Logger: testLogger()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := src.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close with a cancelled context: %v, want an error wrapping context.Canceled", err)
	}
}
