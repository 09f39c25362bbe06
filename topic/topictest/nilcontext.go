package topictest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/within"
	"github.com/boulevard-go/boulevard/topic"
)

// NilContextRefused checks that be's NewTopic and its close (closeFn, the
// backend's Close) return an error matching topic.ErrNilContext for a nil
// context, rather than panicking, and that be, left open, then declares a
// topic. A Handle never passes a nil context to its backend: this holds a
// durable backend's public calls to what the topic package does.
func NilContextRefused(t *testing.T, be topic.Backend[int], closeFn func(context.Context) error) {
	t.Helper()
	var nilCtx context.Context
	calls := []struct {
		name string
		f    func() error
	}{
		{"Backend.NewTopic", func() error { _, err := be.NewTopic(nilCtx, "t", topic.Options{}); return err }},
		{"Backend.Close", func() error { return closeFn(nilCtx) }},
	}
	for _, c := range calls {
		if err := within.Run(10*time.Second, c.f); !errors.Is(err, topic.ErrNilContext) {
			t.Errorf("%s(nil ctx) = %v, want an error matching topic.ErrNilContext", c.name, err)
		}
	}
	h, err := topic.NewTopic[int]("after", topic.Options{}, be)
	if err != nil {
		t.Fatalf("NewTopic after the nil-context calls = %v, want the backend open", err)
	}
	h.Close()
}
