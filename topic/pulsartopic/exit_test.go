package pulsartopic_test

import (
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topictest"
)

// Guarantee: a codec whose Decode ends the receiving goroutine
// (runtime.Goexit, as t.FailNow does) ends only that Receive: the
// message is logged once, with the stack of the exit, and acked as one
// that does not decode, and a later Receive gets the next message.
func TestDecodeGoexitAcksTheMessageAndALaterReceiveGoesOn(t *testing.T) {
	b := testbroker.Pulsar(t)
	var logs syncBuffer
	o := testOptions[int](b, topictest.ExitingCodec[int]{Codec: topic.IntCodec{}})
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	be := newBackend(t, o)
	h := newHandle(t, be, "t", topic.Options{})
	sub := subscribe(t, h, topic.Balanced("g"))
	if _, err := b.Publish(ctxT(t), be.TopicName("t"), pulsartest.Message{Payload: []byte("not an int")}); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		it, err := sub.Receive(ctxT(t))
		t.Errorf("Receive returned %+v, %v; want the codec's exit to end the goroutine", it, err)
	}()
	<-exited
	if err := h.Publish(ctxT(t), 9); err != nil {
		t.Fatal(err)
	}
	it, err := sub.Receive(ctxT(t))
	if err != nil || it.Value != 9 {
		t.Fatalf("Receive = %+v, %v; want 9", it, err)
	}
	if err := sub.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, patience, "both messages acked", func() bool { return b.Backlog(be.TopicName("t"), "g") == 0 })
	out := logs.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "cannot decode") || !strings.Contains(out, "stack=") || !strings.Contains(out, "ExitingCodec") {
		t.Fatalf("logs %q, want one line about the message, with the stack of the exit", out)
	}
	if n := h.Stats().Undecodable; n != 1 {
		t.Fatalf("Stats().Undecodable = %d, want 1", n)
	}
}

// exitOn13 is IntCodec, except that Encode ends its goroutine
// (runtime.Goexit) on 13.
type exitOn13 struct{ topic.IntCodec }

func (c exitOn13) Encode(v int) ([]byte, error) {
	if v == 13 {
		runtime.Goexit()
	}
	return c.IntCodec.Encode(v)
}

// Guarantee: a codec whose Encode ends the publishing goroutine
// (runtime.Goexit) ends only that publish: nothing is sent, no send slot
// stays taken, and later publishes and Close go on.
func TestEncodeGoexitEndsOnlyThatPublish(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, exitOn13{}))
	h := newHandle(t, be, "encode-exit", topic.Options{})
	sub := subscribe(t, h, topic.Balanced("g"))
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		err := h.Publish(ctxT(t), 13)
		t.Errorf("Publish(13) returned %v; want the codec's exit to end the goroutine", err)
	}()
	<-exited
	if err := h.Publish(ctxT(t), 14); err != nil {
		t.Fatal(err)
	}
	if it, err := sub.Receive(ctxT(t)); err != nil || it.Value != 14 {
		t.Fatalf("Receive = %+v, %v; want 14 (13 was never sent)", it, err)
	}
}
