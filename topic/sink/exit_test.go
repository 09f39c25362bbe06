package sink_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
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

// exitingAcker is an upstream acknowledger whose Ack ends its goroutine
// (runtime.Goexit, as t.FailNow does), after telling acked.
type exitingAcker struct{ acked chan<- struct{} }

func (a exitingAcker) Ack(context.Context, []acker.Outcome, []acker.Outcome) {
	a.acked <- struct{}{}
	runtime.Goexit()
}

// Guarantee: with ack propagation auto, an upstream acknowledger that ends
// the goroutine reporting a downstream outcome to it (runtime.Goexit)
// still has that publish counted as reported: the sink's Wait returns,
// whether the message was published alone or in a batch.
func TestAnUpstreamAckThatExitsStillCountsThePublishReported(t *testing.T) {
	for _, c := range []struct {
		name    string
		publish func(*sink.Sink[int], *message.Message[int]) error
	}{
		{"Publish", func(s *sink.Sink[int], m *message.Message[int]) error { return s.Publish(ctxT(t), m) }},
		{"PublishBatch", func(s *sink.Sink[int], m *message.Message[int]) error {
			return s.PublishBatch(ctxT(t), []*message.Message[int]{m})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, sub, s := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
			acked := make(chan struct{}, 1)
			if err := c.publish(s, message.New(1, exitingAcker{acked}, 1)); err != nil {
				t.Fatal(err)
			}
			it, err := sub.Receive(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = sub.Ack(it.ID) }() // reports upstream, on this goroutine, which ends
			<-acked
			ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
			defer cancel()
			if err := s.Wait(ctx); err != nil {
				t.Fatalf("Wait after the upstream Ack ended its goroutine = %v, want nil (the publish was reported)", err)
			}
		})
	}
}
