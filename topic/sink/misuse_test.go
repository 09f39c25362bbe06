package sink_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

// Guarantee: a nil message given to Publish, PublishValue or the sink's
// Handler is refused with ErrNilMessage, nothing published, instead of a
// panic; a nil element of PublishBatch's batch is skipped, the other
// messages are published, and the error returned wraps ErrNilMessage.
// With or without ack propagation.
func TestANilMessageIsRefusedWithErrNilMessage(t *testing.T) {
	for _, auto := range []bool{false, true} {
		t.Run(fmt.Sprint("auto=", auto), func(t *testing.T) {
			opts := topic.Options{}
			if auto {
				opts = autoOpts(0)
			}
			h, sub, s := rig(t, opts, topic.Block, topic.Balanced("g"))
			calls := map[string]func() error{
				"Publish":      func() error { return s.Publish(ctxT(t), nil) },
				"PublishValue": func() error { return sink.PublishValue[string](ctxT(t), s, nil, 1) },
				"Handler":      func() error { _, err := s.Handler()(ctxT(t), nil); return err },
			}
			for name, call := range calls {
				if err := refused(call); !errors.Is(err, sink.ErrNilMessage) {
					t.Errorf("%s(nil): %v, want ErrNilMessage", name, err)
				}
			}
			if st := h.Stats(); st.Published != 0 {
				t.Fatalf("%d published for nil messages, want 0", st.Published)
			}
			rec := acker.NewRecorder(false)
			batch := []*message.Message[int]{message.New(1, rec, 1), nil, message.New(2, rec, 2)}
			if err := refused(func() error { return s.PublishBatch(ctxT(t), batch) }); !errors.Is(err, sink.ErrNilMessage) {
				t.Errorf("PublishBatch with a nil element: %v, want an error wrapping ErrNilMessage", err)
			}
			for _, want := range []int{1, 2} {
				it, err := sub.Receive(ctxT(t))
				if err != nil {
					t.Fatal(err)
				}
				if it.Value != want {
					t.Fatalf("received %d, want %d", it.Value, want)
				}
				if err := sub.Ack(it.ID); err != nil && !errors.Is(err, topic.ErrMessageNotTracked) {
					t.Fatal(err)
				}
			}
		})
	}
}

// Guarantee: a Sink New did not make (a zero value, declared with var)
// publishes nothing and returns an error wrapping topic.ErrNotCreated (on
// the message for PublishBatch) instead of panicking.
func TestAZeroSinkRefusesToPublishWithErrNotCreated(t *testing.T) {
	var s sink.Sink[int]
	if err := refused(func() error { return s.Publish(ctxT(t), message.New(1, acker.Discard, 1)) }); !errors.Is(err, topic.ErrNotCreated) {
		t.Errorf("Publish on a zero Sink: %v, want an error wrapping topic.ErrNotCreated", err)
	}
	m := message.New(1, acker.Discard, 1)
	if err := refused(func() error { return s.PublishBatch(ctxT(t), []*message.Message[int]{m}) }); err != nil {
		t.Errorf("PublishBatch on a zero Sink: %v, want nil (the problem on the message)", err)
	}
	if !errors.Is(m.Err(), topic.ErrNotCreated) {
		t.Errorf("message of PublishBatch on a zero Sink failed with %v, want an error wrapping topic.ErrNotCreated", m.Err())
	}
}

// refused calls call, turning a panic into an error saying so.
func refused(call func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panicked: %v", r)
		}
	}()
	return call()
}

// Guarantee: the other methods of a Sink New did not make (a zero value)
// neither panic nor block: Stats is zero, Tracked is false, Wait and Drain
// return nil at once (nothing is in flight), Close may be called twice, and
// the handlers fail the message with an error wrapping topic.ErrNotCreated.
func TestAZeroSinksOtherMethodsReportNothingAndReturn(t *testing.T) {
	var s sink.Sink[int]
	if err := refused(func() error {
		if st := s.Stats(); st != (sink.Stats{}) {
			return fmt.Errorf("Stats = %+v, want zero", st)
		}
		if s.Tracked() {
			return errors.New("Tracked = true, want false")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	for name, f := range map[string]func() error{
		"Wait":  func() error { return s.Wait(ctxT(t)) },
		"Drain": func() error { return s.Drain(ctxT(t)) },
		"Close": func() error { s.Close(); s.Close(); return nil },
	} {
		if err := refused(f); err != nil {
			t.Errorf("%s on a zero Sink: %v, want nil", name, err)
		}
	}
	if err := refused(func() error { _, err := s.Handler()(ctxT(t), message.New(1, acker.Discard, 1)); return err }); !errors.Is(err, topic.ErrNotCreated) {
		t.Errorf("Handler of a zero Sink: %v, want an error wrapping topic.ErrNotCreated", err)
	}
	m := message.New(1, acker.Discard, 1)
	if err := refused(func() error { return s.BatchHandler()(ctxT(t), []*message.Message[int]{m}, message.BatchInfo{}) }); err != nil && !errors.Is(err, topic.ErrNotCreated) {
		t.Errorf("BatchHandler of a zero Sink: %v, want nil or an error wrapping topic.ErrNotCreated", err)
	}
	if !errors.Is(m.Err(), topic.ErrNotCreated) {
		t.Errorf("message of BatchHandler on a zero Sink failed with %v, want an error wrapping topic.ErrNotCreated", m.Err())
	}
}
