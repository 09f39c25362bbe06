package pulsar_test

import (
	"context"
	"errors"
	"testing"

	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
)

// Guarantee: a stage run on a closed source fails at once with an error
// wrapping ErrSubscribe, without subscribing: the broker gets no
// subscription from it.
func TestRunAfterCloseSubscribesNothing(t *testing.T) {
	e := newEnv(t)
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"closed"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := runUntilGivenUp(t, "closed", src, 0, testLogger()); !errors.Is(err, bpulsar.ErrSubscribe) {
		t.Errorf("Run on a closed source = %v, want ErrSubscribe", err)
	}
	if subs := e.broker.Subscriptions("closed"); len(subs) != 0 {
		t.Errorf("the broker holds subscriptions %q of a closed source", subs)
	}
}
