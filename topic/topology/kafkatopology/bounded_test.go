package kafkatopology

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: when the cluster stops answering, Declare, a group reader's
// and a broadcast reader's Subscribe and SubscribeDead each return by
// their context's deadline (1s, far below AdminTimeout and sarama's
// Net.ReadTimeout, 30s each) with an error wrapping it, and what they
// left running (their clients' first requests, cut at the deadline) ends
// soon after: none of their goroutines is left, while the backend stays
// open.
func TestDeclareAndSubscribeReturnByTheirDeadlineWhenTheClusterHangs(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs())
	q := declare(t, b, topology.New("hung").DLQ())
	bq := declare(t, b, topology.New("hung-all").Broadcast())
	top, err := topology.New("hung-new").Hold(time.Second).DLQ().Build()
	if err != nil {
		t.Fatal(err)
	}
	testbroker.HangKafka(t, c)
	before := goleak.IgnoreCurrent()
	subscribing := func(sub func(context.Context) (topology.Reader[msg], error)) func(context.Context) error {
		return func(ctx context.Context) error {
			r, err := sub(ctx)
			if err == nil {
				t.Errorf("a Subscribe with the cluster hung made a reader")
				_ = r.Close(ctx)
			}
			return err
		}
	}
	for _, call := range []struct {
		what string
		do   func(context.Context) error
	}{
		{"Declare", func(ctx context.Context) error {
			_, err := b.Declare(ctx, top)
			return err
		}},
		{"a group reader's Subscribe", subscribing(q.Subscribe)},
		{"a broadcast reader's Subscribe", subscribing(bq.Subscribe)},
		{"SubscribeDead", subscribing(q.SubscribeDead)},
	} {
		if !testbroker.ReturnsByDeadline(t, call.what, call.do) {
			t.FailNow()
		}
	}
	opts := append(hungCluster(), before)
	var left error
	wait.For(t, "the calls cut short to end", func() bool {
		left = goleak.Find(opts...)
		return left == nil
	}, func() string { return left.Error() })
}
