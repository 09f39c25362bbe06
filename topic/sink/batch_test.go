package sink_test

import (
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: PublishBatch with propagation auto defers every message and reports each one's upstream outcome (ack, or nack with the reason) only once the subscriber settled it.
func TestBatchDeferredUntilDownstreamOutcome(t *testing.T) {
	_, sub, s := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
	rec := acker.NewRecorder(false)
	batch := []*message.Message[int]{message.New(1, rec, 1), message.New(2, rec, 2)}
	if err := s.PublishBatch(ctxT(t), batch); err != nil {
		t.Fatal(err)
	}
	for _, m := range batch {
		if !m.Deferred() {
			t.Fatalf("message %d not deferred: the batcher would ack it before the downstream outcome", m.Data)
		}
	}
	reason := errors.New("downstream rejected 2")
	for range 2 {
		if rec.Total() != 0 {
			t.Fatalf("outcomes reported before every subscriber outcome: %+v", rec.Calls())
		}
		it, err := sub.Receive(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if it.Value == 2 {
			err = sub.Nack(it.ID, reason)
		} else {
			err = sub.Ack(it.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Wait(ctxT(t), 2); err != nil {
		t.Fatalf("upstream outcomes never reported: %v (got %+v)", err, rec.Calls())
	}
	ok, failed := rec.Successful(), rec.Failed()
	if len(ok) != 1 || ok[0].ID != 1 || len(failed) != 1 || failed[0].ID != 2 || !errors.Is(failed[0].Err, reason) {
		t.Fatalf("successful %+v, failed %+v; want 1 acked and 2 failed with the subscriber's reason", ok, failed)
	}
}

// Guarantee: PublishBatch skips messages that already failed: they are not published downstream and not deferred.
func TestBatchSkipsFailedMessages(t *testing.T) {
	h, sub, s := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
	rec := acker.NewRecorder(false)
	bad, good := message.New(1, rec, 1), message.New(2, rec, 2)
	bad.Fail(errors.New("failed upstream of the sink"))
	if err := s.PublishBatch(ctxT(t), []*message.Message[int]{bad, good}); err != nil {
		t.Fatal(err)
	}
	if bad.Deferred() {
		t.Fatal("a failed message was deferred")
	}
	if st, ts := s.Stats(), h.Stats(); st.Published != 1 || ts.Published != 1 {
		t.Fatalf("sink published %d, topic %d; want only the good message", st.Published, ts.Published)
	}
	it, err := sub.Receive(ctxT(t))
	if err != nil || it.Value != 2 {
		t.Fatalf("Receive = %+v, %v; want value 2", it, err)
	}
}

// Guarantee: with ack propagation auto, a message of a PublishBatch that
// the topic refuses (drop_newest on a full queue) is failed with the
// topic's error and left undeferred, so the pipeline reports it, and the
// outcomes of the batch's messages that were published are still
// reported upstream.
func TestBatchMessageTheTopicRefusesIsFailedAndTheOthersStillReported(t *testing.T) {
	o := autoOpts(0)
	o.Balanced.Capacity = 1
	_, sub, s := rig(t, o, topic.DropNewest, topic.Balanced("g"))
	rec := acker.NewRecorder(false)
	batch := []*message.Message[int]{message.New(1, rec, 1), message.New(2, rec, 2)}
	if err := s.PublishBatch(ctxT(t), batch); err != nil {
		t.Fatal(err)
	}
	if refused := batch[1]; !refused.Failed() || refused.Deferred() || !errors.Is(refused.Err(), topic.ErrDroppedOnFull) {
		t.Fatalf("message 2 dropped on a full queue: failed %v, deferred %v, error %v; want failed with topic.ErrDroppedOnFull, not deferred",
			refused.Failed(), refused.Deferred(), refused.Err())
	}
	ackNext(t, sub)
	if err := rec.Wait(ctxT(t), 1); err != nil {
		t.Fatalf("the outcome of the published message 1 was never reported: %v", err)
	}
	if ok := rec.Successful(); len(ok) != 1 || ok[0].ID != 1 || rec.Total() != 1 {
		t.Fatalf("outcomes %+v, want message 1 successful only", rec.Calls())
	}
}
