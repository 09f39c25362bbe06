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
