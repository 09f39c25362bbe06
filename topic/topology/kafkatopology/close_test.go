package kafkatopology

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: when the cluster stops answering, a group reader's Close, a
// broadcast reader's Close and the backend's Close each return by their
// context's deadline with an error wrapping it, and the closing they leave
// behind ends soon after, far sooner than sarama's Net.ReadTimeout (30s):
// a later Close returns nil within 10s, every connection of the backend is
// closed and none of its goroutines is left.
func TestCloseReturnsByItsDeadlineWhenTheClusterHangs(t *testing.T) {
	before := goleak.IgnoreCurrent()
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs())
	q := declare(t, b, topology.New("hung").Hold(time.Second).DLQ())
	r := subscribe(t, q)
	bc := subscribe(t, declare(t, b, topology.New("hung-all").Broadcast()))
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 1}}); err != nil {
		t.Fatal(err)
	}
	l := receiveOne(t, r) // the group has joined: its reader has a commit and a leave to make
	if err := r.Settle(t.Context(), &l); err != nil {
		t.Fatal(err)
	}
	testbroker.HangKafka(t, c)
	for _, cl := range []struct {
		what  string
		close func(context.Context) error
	}{{"a group reader", r.Close}, {"a broadcast reader", bc.Close}, {"the backend", b.Close}} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		done := make(chan error, 1)
		go func() { done <- cl.close(ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("closing %s with the cluster hung = %v, want an error wrapping context.DeadlineExceeded", cl.what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("closing %s with the cluster hung still runs 10s after its 1s deadline", cl.what)
		}
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatalf("the backend's closing, cut short at its deadline, still runs 10s later: %v", err)
	}
	if n := b.conns.Len(); n != 0 {
		t.Errorf("%d connections of the backend still open after its closing", n)
	}
	goleak.VerifyNone(t, before,
		// The hung cluster's own goroutines, until the test ends.
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).run"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).runControl.func1"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*broker).listen"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*clientConn).read"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*clientConn).write"),
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}
