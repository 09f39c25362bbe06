package pulsar_test

import (
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// Guarantee: Close returns by its context's deadline, with an error
// wrapping context.DeadlineExceeded, while the broker does not answer the
// close of a consumer: the client's close request, bounded only by its
// OperationTimeout (here far longer), is left to finish in the background
// and a later Close waits for it.
func TestCloseReturnsByItsDeadlineWhileTheBrokerWithholdsTheConsumerClose(t *testing.T) {
	e := newEnv(t)
	cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: e.broker.URL(), OperationTimeout: time.Minute, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	want := e.publish("hung-close", "m", 1)
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: cl, Topics: []string{"hung-close"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	run(t, src, 1, producer.Flow{}, recordAll(r))
	wait.Within(t, waitLimit, "the message handled", func() bool { return r.distinct() == len(want) })
	release := e.broker.Withhold(pulsartest.CommandCloseConsumer)
	t.Cleanup(release) // before the pipeline stops
	testbroker.ReturnsByDeadline(t, "Close", src.Close)
}
