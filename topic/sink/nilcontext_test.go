package sink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/within"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

// nilCtx is the nil context the calls below are given.
var nilCtx context.Context

// Guarantee: Publish, PublishValue, PublishBatch, Drain and Wait return an
// error matching topic.ErrNilContext for a nil context, rather than
// panicking, and publish nothing; the messages given are neither deferred
// nor failed, and Drain leaves the sink open. With or without ack
// propagation.
func TestANilContextIsAnErrorNotAPanic(t *testing.T) {
	for _, auto := range []bool{false, true} {
		t.Run(fmt.Sprint("auto=", auto), func(t *testing.T) {
			opts := topic.Options{}
			if auto {
				opts = autoOpts(0)
			}
			h, _, s := rig(t, opts, topic.Block, topic.Balanced("g"))
			rec := acker.NewRecorder(false)
			m := message.New(1, rec, 1)
			calls := []within.Call{
				{Name: "Publish", F: func() error { return s.Publish(nilCtx, m) }},
				{Name: "PublishValue", F: func() error { return sink.PublishValue(nilCtx, s, m, 1) }},
				{Name: "PublishBatch", F: func() error { return s.PublishBatch(nilCtx, []*message.Message[int]{m}) }},
				{Name: "Drain", F: func() error { return s.Drain(nilCtx) }},
				{Name: "Wait", F: func() error { return s.Wait(nilCtx) }},
			}
			within.Refused(t, 5*time.Second, topic.ErrNilContext, calls...)
			if st := h.Stats(); st.Published != 0 {
				t.Errorf("%d published for nil contexts, want 0", st.Published)
			}
			if st := s.Stats(); st != (sink.Stats{}) {
				t.Errorf("sink stats after the nil-context calls: %+v, want zero", st)
			}
			if m.Deferred() {
				t.Errorf("the message is deferred after the nil-context calls")
			}
			// Drain(nil) left the sink open: it still publishes.
			if err := s.Publish(ctxT(t), message.New(2, rec, 2)); err != nil {
				t.Errorf("Publish after the nil-context calls = %v, want nil", err)
			}
		})
	}
}
