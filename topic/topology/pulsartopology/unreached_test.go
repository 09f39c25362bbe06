package pulsartopology_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// Guarantee: once Close of a backend that made its own client (its
// timeouts left to their defaults) returns, nothing of a Declare that
// gave up on a broker where nothing listens is still running, the
// client's lookup retries included: the client gives up within
// Options.OperationTimeout, which Close waits for.
func TestCloseAfterADeclareWhereNothingListensLeavesNoGoroutineRunning(t *testing.T) {
	o := pulsartopology.Options[int]{ServiceURL: "pulsar://" + testnet.ClosedPort(t), Codec: topic.IntCodec{},
		Logger: testbroker.PulsarLogger(), OperationTimeout: time.Second}
	be, err := pulsartopology.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = be.Declare(ctx, build(t, topology.New("orders").DLQ()))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Declare = %v, want its context's deadline", err)
	}
	if err := be.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, reconnectNotice)
}
