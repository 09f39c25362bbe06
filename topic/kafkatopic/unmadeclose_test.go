package kafkatopic_test

import (
	"context"
	"errors"
	"testing"

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
