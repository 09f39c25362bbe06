package sink_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: with ack propagation auto, when Options.Headers ends the
// goroutine of a PublishBatch (runtime.Goexit, as t.FailNow does) on one
// message, the messages of the batch published before it still have
// their downstream outcomes reported upstream, and the sink's Wait
// returns.
func TestHeadersGoexitInPublishBatchKeepsTheOutcomesOfThePublished(t *testing.T) {
	headers := func(_ context.Context, m message.Keyed) topic.Headers {
		if m.PartitionKey() == "k2" {
			runtime.Goexit()
		}
		return nil
	}
	sub, s := headerRig(t, autoOpts(0), headers)
	rec := acker.NewRecorder(false)
	batch := []*message.Message[int]{keyed(1, rec, 1), keyed(2, rec, 2), keyed(3, rec, 3)}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		err := s.PublishBatch(ctxT(t), batch)
		t.Errorf("PublishBatch returned %v; want the exit to end its goroutine", err)
	}()
	<-exited
	if batch[1].Deferred() {
		t.Error("the message whose headers exited was left deferred: its outcome would never be reported")
	}
	it, err := sub.Receive(ctxT(t))
	if err != nil || it.Value != 1 {
		t.Fatalf("Receive = %+v, %v; want 1", it, err)
	}
	if err := sub.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	if err := rec.Wait(ctxT(t), 1); err != nil {
		t.Fatalf("the outcome of message 1 was never reported: %v (got %+v)", err, rec.Calls())
	}
	if got := rec.Successful(); len(got) != 1 || got[0].ID != 1 {
		t.Fatalf("successful %+v, want message 1", got)
	}
	if err := s.Wait(ctxT(t)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}
