package kafkatopology

import (
	"context"
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
		if !testbroker.ReturnsByDeadline(t, "closing "+cl.what, cl.close) {
			t.FailNow()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.HungGrace)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatalf("the backend's closing, cut short at its deadline, still runs 10s later: %v", err)
	}
	if n := b.conns.Len(); n != 0 {
		t.Errorf("%d connections of the backend still open after its closing", n)
	}
	goleak.VerifyNone(t, append(hungCluster(), before)...)
}
