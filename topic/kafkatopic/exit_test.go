package kafkatopic_test

import (
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topictest"
)

// Guarantee: a codec whose Decode ends its goroutine (runtime.Goexit, as
// t.FailNow does) on a record makes that record one that does not decode:
// logged once, with the stack of the exit, for the group and once for a
// broadcast subscriber, committed past, and both go on with the next
// record; Close returns.
func TestDecodeGoexitSkipsTheRecordAndTheSubscribersGoOn(t *testing.T) {
	c := testbroker.Kafka(t)
	var logs logBuffer
	o := testOptions[int](c, topictest.ExitingCodec[int]{Codec: topic.IntCodec{}})
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	b := newBackend(t, o)
	h := newTopic(t, b, "mixed-exit", topic.Options{Mode: topic.Mixed})
	m := subscribe(t, h, topic.Balanced("g"))
	bc := subscribe(t, h, topic.Broadcast())
	pc := testbroker.SaramaConfig()
	pc.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(c.ListenAddrs(), pc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "mixed-exit", Value: sarama.StringEncoder("not an int")}); err != nil {
		t.Fatal(err)
	}
	if err := h.Publish(ctxT(t), 7); err != nil {
		t.Fatal(err)
	}
	vs, ids := recvValues(t, m, 1)
	if vs[0] != 7 {
		t.Fatalf("received %v, want 7", vs)
	}
	if err := m.Ack(ids[0]); err != nil {
		t.Fatal(err)
	}
	if it := recv(t, bc); it.Value != 7 {
		t.Fatalf("the broadcast subscriber received %d, want 7", it.Value)
	}
	out := logs.String()
	if n := strings.Count(out, "does not decode"); n != 2 {
		t.Fatalf("%d decode lines, want 2 (the group's and the broadcast subscriber's): %s", n, out)
	}
	if n := strings.Count(out, "stack="); n != 2 || !strings.Contains(out, "ExitingCodec") {
		t.Fatalf("want 2 lines naming the exit, with its stack: %s", out)
	}
	if n := h.Stats().Undecodable; n != 2 {
		t.Fatalf("Stats().Undecodable = %d, want 2 (the group's and the broadcast subscriber's)", n)
	}
	m.Close()
	m = subscribe(t, h, topic.Balanced("g"))
	recvNothing(t, m)
	if n := strings.Count(logs.String(), "does not decode"); n != 2 {
		t.Fatalf("the record was read again: %s", logs.String())
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
// (runtime.Goexit) ends only that publish: nothing is sent, nothing of
// the topic stays held, and later publishes and Close go on.
func TestEncodeGoexitEndsOnlyThatPublish(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, testOptions[int](c, exitOn13{}))
	h := newTopic(t, b, "encode-exit", topic.Options{})
	m := subscribe(t, h, topic.Balanced("g"))
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
	if it := recv(t, m); it.Value != 14 {
		t.Fatalf("received %d, want 14 (13 was never sent)", it.Value)
	}
}
