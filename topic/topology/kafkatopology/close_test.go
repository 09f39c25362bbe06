package kafkatopology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
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

// Guarantee: once the backend's Close has returned, cut short at its
// deadline by a cluster that stopped answering or done, Publish, Hold,
// Requeue and DeadLetter each return an error wrapping topology.ErrClosed
// at once; a Publish that was waiting for the broker's acknowledgement
// when Close was called returns nil or such an error, once Close has cut
// the connections.
func TestSendsReturnErrClosedOnceTheBackendClosesWhenTheClusterHangs(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs())
	q := declare(t, b, topology.New("closed").Hold(time.Second).DLQ())
	testbroker.HangKafka(t, c)
	l := topology.Letter[msg]{Value: msg{N: 1}}
	under := make(chan error, 1)
	go func() { under <- q.Publish(context.Background(), l) }()
	wait.For(t, "the publish to wait for the broker", func() bool {
		if b.prodMu.TryLock() { // a produce under way holds it shared
			b.prodMu.Unlock()
			return false
		}
		return true
	})
	if !testbroker.ReturnsByDeadline(t, "closing the backend", b.Close) {
		t.FailNow()
	}
	select {
	case err := <-under:
		if err != nil && !errors.Is(err, topology.ErrClosed) {
			t.Errorf("a Publish under way when the backend closed = %v, want nil or an error wrapping topology.ErrClosed", err)
		}
	case <-time.After(testbroker.HungGrace):
		t.Fatalf("a Publish under way when the backend closed still runs %v after the closing was cut", testbroker.HungGrace)
	}
	sends := []struct {
		what string
		send func() error
	}{
		{"Publish", func() error { return q.Publish(t.Context(), l) }},
		{"Hold", func() error { return q.Hold(t.Context(), 0, l) }},
		{"Requeue", func() error { return q.Requeue(t.Context(), l) }},
		{"DeadLetter", func() error { return q.DeadLetter(t.Context(), l) }},
	}
	refused := func(when string) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			var errs []error
			for _, s := range sends {
				if err := s.send(); !errors.Is(err, topology.ErrClosed) {
					errs = append(errs, fmt.Errorf("%s %s = %v, want an error wrapping topology.ErrClosed", s.what, when, err))
				}
			}
			done <- errors.Join(errs...)
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(testbroker.HungGrace):
			t.Fatalf("the sends %s still run %v later", when, testbroker.HungGrace)
		}
	}
	refused("after a Close cut short")
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.HungGrace)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatalf("the backend's closing, cut short at its deadline, still runs 10s later: %v", err)
	}
	refused("once the closing has ended")
}

// Guarantee: a group reader's Close given a context already done returns
// at once with an error wrapping it, and its closing still commits what
// was settled: once it has ended (a later Close returns nil), the group's
// committed offset is past the settled letter.
func TestAReaderClosedWithAContextDoneCommitsWhatWasSettled(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs())
	q := declare(t, b, topology.New("closed-done"))
	r := subscribe(t, q)
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 1}}); err != nil {
		t.Fatal(err)
	}
	l := receiveOne(t, r)
	if err := r.Settle(t.Context(), &l); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Close(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with a context already done = %v, want an error wrapping context.Canceled", err)
	}
	topologytest.MustClose(t, "the reader again", r.Close)
	gr := r.(*groupReader[msg])
	if got := testbroker.Committed(t, testbroker.Admin(t, c.ListenAddrs()), gr.topic, gr.gid); got[0] != 1 {
		t.Errorf("committed offset after a Close with a context already done = %d, want 1 (past the settled letter)", got[0])
	}
}

// Guarantee: the closing a group reader's Close leaves behind, given a
// context already done, ends by Options.AdminTimeout when the cluster
// stopped answering its last commit: a later Close returns nil within 10s,
// the backend still open, and the reader holds no connection.
func TestAReaderClosingLeftBehindEndsByTheAdminTimeoutWhenTheClusterHangs(t *testing.T) {
	c := testbroker.Kafka(t)
	b, err := New(Options[msg]{
		Brokers:      c.ListenAddrs(),
		Config:       testbroker.SaramaConfig(),
		Codec:        topic.JSONCodec[msg]{},
		AdminTimeout: time.Second,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "the backend", b.Close) })
	q := declare(t, b, topology.New("hung-reader"))
	r := subscribe(t, q)
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 1}}); err != nil {
		t.Fatal(err)
	}
	l := receiveOne(t, r)
	if err := r.Settle(t.Context(), &l); err != nil {
		t.Fatal(err)
	}
	testbroker.HangKafka(t, c)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Close(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with a context already done = %v, want an error wrapping context.Canceled", err)
	}
	ctx, cancelLater := context.WithTimeout(context.Background(), testbroker.HungGrace)
	defer cancelLater()
	if err := r.Close(ctx); err != nil {
		t.Fatalf("the reader's closing, left behind with the cluster hung, still runs %v later (AdminTimeout 1s): %v", testbroker.HungGrace, err)
	}
	if n := r.(*groupReader[msg]).conns.Len(); n != 0 {
		t.Errorf("%d connections of the reader still open after its closing", n)
	}
}

// Guarantee: the backend's Close closes its readers, each committing what
// was settled, without waiting for a listing of the log ends under way
// that the cluster does not answer (sarama waits up to Net.ReadTimeout,
// 30s, for it): a Receive waiting on a reader returns ErrClosed within 5s
// of the Close, and once the closing has ended (cut at Close's 10s
// deadline) the group's committed offset is past the settled letter.
func TestCloseClosesTheReadersWhileAListingOfLogEndsHangs(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs(), func(o *Options[msg]) { o.HighWaterInterval = 50 * time.Millisecond })
	q := declare(t, b, topology.New("ends-hung"))
	r := subscribe(t, q)
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 1}}); err != nil {
		t.Fatal(err)
	}
	l := receiveOne(t, r)
	listing := make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		once.Do(func() { close(listing) })
		return nil, nil, false // held next, by HangKafkaKey
	})
	testbroker.HangKafkaKey(t, c, kmsg.ListOffsets)
	<-listing
	if err := r.Settle(t.Context(), &l); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testbroker.HungGrace)
		defer cancel()
		closed <- b.Close(ctx)
	}()
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.Receive(rctx, make([]topology.Letter[msg], 1)); !errors.Is(err, topology.ErrClosed) {
		t.Errorf("a Receive as the backend closes while a listing of the log ends hangs = %v, want an error wrapping topology.ErrClosed", err)
	}
	if err := <-closed; err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the backend's Close while a listing of the log ends hangs = %v, want nil or an error wrapping context.DeadlineExceeded", err)
	}
	topologytest.MustClose(t, "the backend again", b.Close)
	gr := r.(*groupReader[msg])
	if got := testbroker.Committed(t, testbroker.Admin(t, c.ListenAddrs()), gr.topic, gr.gid); got[0] != 1 {
		t.Errorf("committed offset after the backend's Close = %d, want 1 (past the settled letter)", got[0])
	}
}
