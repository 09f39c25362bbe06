package pulsar_test

import (
	"context"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/internal/within"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
)

// nilCtx is the nil context the calls below are given.
var nilCtx context.Context

// Guarantee: Run and Close return ErrNilContext for a nil context, rather
// than panicking, before doing anything: Run subscribes nothing, and
// Close leaves the source open, so that a pipeline run on it afterwards
// subscribes and handles what was published.
func TestANilContextIsAnErrorNotAPanic(t *testing.T) {
	e := newEnv(t)
	want := e.publish("nilctx", "m", 1)
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"nilctx"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	calls := []within.Call{
		{Name: "Run", F: func() error { return src.Run(nilCtx, new(producer.Stage[[]byte])) }},
		{Name: "Close", F: func() error { return src.Close(nilCtx) }},
	}
	within.Refused(t, 5*time.Second, bpulsar.ErrNilContext, calls...)
	if subs := e.broker.Subscriptions("nilctx"); len(subs) != 0 {
		t.Errorf("the broker holds subscriptions %q after Run(nil)", subs)
	}
	r := newReceived()
	run(t, src, 1, producer.Flow{}, recordAll(r))
	wait.Within(t, waitLimit, "the message handled after Close(nil)", func() bool { return r.distinct() == len(want) })
}
