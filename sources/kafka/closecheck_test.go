package kafka_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// endedClose is a source whose Close is called with a context that has
// ended already, as a pipeline whose stop was cut short calls it.
type endedClose struct{ testSource }

func (s endedClose) Close(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return s.testSource.Close(ctx)
}

// Guarantee: Close ends the attempts of a connection check still running
// (a broker that accepts the connection and never answers) even when its
// context has ended: once it has returned, no goroutine of the source is
// left, rather than one per broker for up to ConnectTimeout.
func TestACloseWithAnEndedContextEndsTheConnectionCheckStillRunning(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		addr, accepted := testnet.SilentListenerAccepting(t)
		before := goleak.IgnoreCurrent() // the listener's
		src := cl.new(t, kafka.Options{Brokers: []string{addr}, GroupID: "g-close-check", Topics: []string{testTopic},
			ConnectTimeout: time.Minute})
		p := startPipeline(t, pipelineOpts("close-check", endedClose{src}, 1, newLedger(), nil))
		select {
		case <-accepted:
		case <-time.After(10 * time.Second):
			stopPipeline(t, p)
			t.Fatal("the connection check did not dial the broker within 10s")
		}
		stopPipeline(t, p)
		goleak.VerifyNone(t, before,
			goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
	})
}
