package producer_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// stoppedOutput is a fake Output whose Publish waits for the hard stop and
// then takes the first took messages it was given before failing, as
// processors that were taking a chunk in when the pipeline stopped hard.
type stoppedOutput struct {
	*recorder
	took    int
	entered chan struct{}
}

func (o *stoppedOutput) Publish(ctx context.Context, msgs []*message.Message[item]) (int, error) {
	close(o.entered)
	<-ctx.Done()
	n, _ := o.recorder.Publish(ctx, msgs[:o.took])
	return n, ctx.Err()
}

// Guarantee: after a hard stop Unhandled counts exactly the delivered
// messages the processors never took: the rest of the chunk they were
// taking in, and everything still buffered.
func TestUnhandledCountsEveryMessageTheHardStopLeftUntaken(t *testing.T) {
	out := &stoppedOutput{recorder: newRecorder(), took: 2, entered: make(chan struct{})}
	var st *producer.Stage[item]
	delivered := make(chan struct{})
	src := producer.SourceFunc[item](func(ctx context.Context, s *producer.Stage[item]) error {
		st = s
		f := s.NewFeed("only", func(int) {})
		f.Deliver(items(0, 5)...)
		<-out.entered
		f.Deliver(items(5, 10)...)
		close(delivered)
		<-ctx.Done()
		return ctx.Err()
	})
	h := start(t, "p", producer.Options[item]{Source: src}, out, nil)
	<-delivered
	h.cancel()
	waitDone(t, h)
	if got := out.seqs("only"); !slices.Equal(got, seqRange(2)) {
		t.Fatalf("the processors took %v, want the first 2", got)
	}
	if got := st.Unhandled(); got != 8 {
		t.Errorf("Unhandled = %d, want the 3 of the chunk the processors did not take and the 5 buffered", got)
	}
}

// closedOutput is a fake Output that is closed: it takes nothing, with or
// without waiting.
type closedOutput struct{}

var errOutputClosed = errors.New("output closed")

func (closedOutput) Publish(context.Context, []*message.Message[item]) (int, error) {
	return 0, errOutputClosed
}

func (closedOutput) TryPublish([]*message.Message[item]) (int, error) { return 0, errOutputClosed }

// Guarantee: messages that closed processors refuse, when offered straight
// away, stay the stage's: they are not lost but counted in Unhandled.
func TestMessagesClosedProcessorsRefuseAreUnhandled(t *testing.T) {
	var st *producer.Stage[item]
	src := producer.SourceFunc[item](func(ctx context.Context, s *producer.Stage[item]) error {
		st = s
		s.NewFeed("only", func(int) {}).Deliver(items(0, 5)...)
		return nil
	})
	h := start(t, "p", producer.Options[item]{Source: src}, closedOutput{}, nil)
	waitDone(t, h)
	if got := st.Unhandled(); got != 5 {
		t.Errorf("Unhandled = %d, want the 5 messages the closed processors refused", got)
	}
}
