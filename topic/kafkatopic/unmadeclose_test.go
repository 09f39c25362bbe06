package kafkatopic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// TestANilOrUnmadeBackendClosesWithNilAndRefusesNewTopics checks that closing a nil
// Backend, or a zero one New did not make, twice, returns nil instead of
// panicking (on the caller or on the closing's own goroutine), and that
// both then refuse a topic as closed.
func TestANilOrUnmadeBackendClosesWithNilAndRefusesNewTopics(t *testing.T) {
	for name, b := range map[string]*kafkatopic.Backend[string]{"nil": nil, "zero": {}} {
		for i := range 2 {
			if err := b.Close(context.Background()); err != nil {
				t.Errorf("%s backend: Close #%d = %v, want nil", name, i+1, err)
			}
		}
		if _, err := b.NewTopic(context.Background(), "t", topic.Options{}); !errors.Is(err, topic.ErrTopicClosed) {
			t.Errorf("%s backend: NewTopic = %v, want topic.ErrTopicClosed", name, err)
		}
	}
}

// TestAnUnmadeBackendRefusesNewTopicsAsNotCreatedUntilClosed checks that
// a zero Backend, which has no client, refuses a topic at once with an
// error wrapping topic.ErrNotCreated instead of panicking on the
// declaration's goroutine, and as closed once closed.
func TestAnUnmadeBackendRefusesNewTopicsAsNotCreatedUntilClosed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b := &kafkatopic.Backend[string]{}
	if _, err := b.NewTopic(ctx, "t", topic.Options{}); !errors.Is(err, topic.ErrNotCreated) {
		t.Errorf("NewTopic = %v, want topic.ErrNotCreated", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if _, err := b.NewTopic(ctx, "t", topic.Options{}); !errors.Is(err, topic.ErrTopicClosed) {
		t.Errorf("NewTopic after Close = %v, want topic.ErrTopicClosed", err)
	}
}
