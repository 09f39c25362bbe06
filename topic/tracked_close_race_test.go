package topic_test

import (
	"context"
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
)

// gatedBackend is the in-memory backend whose publishes each wait, once
// started, until gate is closed; entered receives when one has started.
type gatedBackend struct {
	entered chan struct{}
	gate    chan struct{}
}

func (gatedBackend) Name() string { return "gated" }

func (gatedBackend) Capabilities() topic.Capabilities { return topic.InMemory[int]{}.Capabilities() }

func (b gatedBackend) NewTopic(ctx context.Context, name topic.Name, opts topic.Options) (topic.State[int], error) {
	st, err := topic.InMemory[int]{}.NewTopic(ctx, name, opts)
	return gatedState{State: st, b: b}, err
}

type gatedState struct {
	topic.State[int]
	b gatedBackend
}

func (s gatedState) Publish(ctx context.Context, e topic.Envelope[int], onFull topic.OnFull) (topic.PublishOutcome, error) {
	s.b.entered <- struct{}{}
	<-s.b.gate
	return s.State.Publish(ctx, e, onFull)
}

// Guarantee: a tracked publish that the backend completes after the
// publisher was closed still gets an outcome: its receipt resolves as
// TopicClosed with ErrPublisherClosed, rather than staying pending.
func TestPublishCompletedAfterPublisherCloseResolvesTopicClosed(t *testing.T) {
	b := gatedBackend{entered: make(chan struct{}), gate: make(chan struct{})}
	h, err := topic.NewTopic[int]("t", topic.Options{AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto}}, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	subscribeInt(t, h, topic.Balanced("g"))
	p := newTracked(t, h, topic.TrackedOptions{})
	type published struct {
		rc  *topic.Receipt
		err error
	}
	done := make(chan published, 1)
	go func() {
		rc, err := p.Publish(t.Context(), 1)
		done <- published{rc, err}
	}()
	<-b.entered // the publish is in the backend
	p.Close()
	close(b.gate)
	r := <-done
	if r.err != nil {
		t.Fatalf("Publish = %v, want the receipt of the publish the backend made", r.err)
	}
	res, ok := r.rc.Result()
	if !ok || res.Outcome != topic.TopicClosed || !errors.Is(res.Reason, topic.ErrPublisherClosed) {
		t.Fatalf("Result = %+v, %v; want TopicClosed with ErrPublisherClosed", res, ok)
	}
}
