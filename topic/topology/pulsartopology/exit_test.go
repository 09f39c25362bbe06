package pulsartopology_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topictest"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// syncLog is a log sink safe for concurrent writers.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *syncLog) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// Guarantee: a codec whose Decode ends the receiving goroutine
// (runtime.Goexit, as t.FailNow does) ends only that Receive: the message
// is logged once, with the stack of the exit, acknowledged and counted
// (Undecodable) as one that does not decode, and a later Receive gets the
// next letter.
func TestDecodeGoexitAcksTheMessageAndALaterReceiveGoesOn(t *testing.T) {
	br := testbroker.Pulsar(t)
	var logs syncLog
	o := options(br, topic.Codec[string](topictest.ExitingCodec[string]{Codec: topic.JSONCodec[string]{}}))
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	be := newBackend(t, o)
	top := build(t, topology.New("exits"))
	q, r := declared(t, be, top)
	defer topologytest.MustClose(t, "a reader", r.Close)
	if _, err := br.Publish(ctxT(t), full("exits"), pulsartest.Message{Payload: []byte("not json")}); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		n, err := r.Receive(ctxT(t), make([]topology.Letter[string], 4))
		t.Errorf("Receive returned %d, %v; want the codec's exit to end the goroutine", n, err)
	}()
	<-exited
	if err := q.Publish(ctxT(t), topology.Letter[string]{Value: "good"}); err != nil {
		t.Fatal(err)
	}
	buf := make([]topology.Letter[string], 1)
	if n, err := r.Receive(ctxT(t), buf); err != nil || n != 1 || buf[0].Value != "good" {
		t.Fatalf("Receive: %d %+v, %v; want the letter \"good\"", n, buf[0], err)
	}
	if err := r.Settle(ctxT(t), &buf[0]); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, patience, "both messages acknowledged", func() bool { return br.Backlog(full("exits"), top.ConsumerGroup()) == 0 })
	out := logs.String()
	if strings.Count(out, "does not decode") != 1 || !strings.Contains(out, "stack=") || !strings.Contains(out, "ExitingCodec") {
		t.Fatalf("logs %q, want one line about the message, with the stack of the exit", out)
	}
	if n := r.(topology.UndecodableCounter).Undecodable(); n != 1 {
		t.Fatalf("Undecodable() = %d, want 1", n)
	}
}
