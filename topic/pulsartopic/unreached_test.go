package pulsartopic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// Guarantee: once Close of a backend that made its own client (its
// timeouts left to their defaults) returns, nothing of a declaration that
// gave up on a broker where nothing listens is still running, the
// client's lookup retries included: the client gives up within
// Options.AdminTimeout, which Close waits for.
func TestCloseAfterADeclarationWhereNothingListensLeavesNoGoroutineRunning(t *testing.T) {
	o := pulsartopic.Options[int]{ServiceURL: "pulsar://" + testnet.ClosedPort(t), Codec: topic.IntCodec{},
		Logger: testbroker.PulsarLogger(), AdminTimeout: time.Second}
	be, err := pulsartopic.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = topic.NewBroker[int]().CreateTopicsContext(ctx, []topic.Declaration[int]{{Name: "orders", Backend: be}})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CreateTopicsContext = %v, want its context's deadline", err)
	}
	if err := be.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignoreGrabConn)
}
