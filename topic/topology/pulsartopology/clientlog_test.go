package pulsartopology_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: declaring a topology, which subscribes to every subscription
// it makes sure of and closes the consumer at once, declaring it again, a
// reader's life and the backend's Close log no ERROR line, the client's
// own included.
func TestDeclareAndCloseLogNoError(t *testing.T) {
	br := testbroker.Pulsar(t)
	var lines logtest.Lines
	o := options(br, topic.Codec[string](topic.StringCodec{}))
	o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
	be := newBackend(t, o) // closed again at the cleanup: idempotent
	top := build(t, topology.New("quiet").ForConsumerGroup("audit").Hold(time.Second).Hold(5*time.Second).DLQ())
	if _, err := be.Declare(ctxT(t), top); err != nil {
		t.Fatal(err)
	}
	q, r := declared(t, be, top)
	if err := q.Publish(ctxT(t), topology.Letter[string]{Value: "a"}); err != nil {
		t.Fatal(err)
	}
	buf := make([]topology.Letter[string], 1)
	if n, err := r.Receive(ctxT(t), buf); err != nil || n != 1 {
		t.Fatalf("received %d: %v, want the letter published", n, err)
	}
	if err := r.Settle(ctxT(t), &buf[0]); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := be.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	lines.Want(t, 0, "ERROR lines", "level=ERROR")
}
