package sink_test

import (
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

// Guarantee: a message gets one outcome however many tracked sinks it is
// offered to: a second tracked publish of a message deferred already is
// refused (ErrAlreadyDeferred) and publishes nothing, and PublishBatch
// skips such a message.
func TestSecondTrackedPublishOfAMessageIsRefused(t *testing.T) {
	_, sub1, s1 := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
	h2, _, s2 := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
	rec := acker.NewRecorder(false)
	m := message.New(1, rec, 1)
	if err := s1.Publish(ctxT(t), m); err != nil {
		t.Fatal(err)
	}
	if err := s2.Publish(ctxT(t), m); !errors.Is(err, sink.ErrAlreadyDeferred) {
		t.Fatalf("second tracked Publish = %v, want ErrAlreadyDeferred", err)
	}
	if err := s2.PublishBatch(ctxT(t), []*message.Message[int]{m}); err != nil {
		t.Fatal(err)
	}
	if st := h2.Stats(); st.Published != 0 {
		t.Fatalf("the second topic got %d publishes of a message deferred already, want 0", st.Published)
	}
	ackNext(t, sub1)
	if err := rec.Wait(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	if rec.Total() != 1 || !m.Deferred() || m.Failed() {
		t.Fatalf("upstream message 1 got %d outcomes (deferred %v, failed %v), want 1 from the first sink", rec.Total(), m.Deferred(), m.Failed())
	}
}
