package topictest

import (
	"context"
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
	calls := []within.Call{
		{Name: "Backend.NewTopic", F: func() error { _, err := be.NewTopic(nilCtx, "t", topic.Options{}); return err }},
		{Name: "Backend.Close", F: func() error { return closeFn(nilCtx) }},
	}
	within.Refused(t, 10*time.Second, topic.ErrNilContext, calls...)
	h, err := topic.NewTopic[int]("after", topic.Options{}, be)
	if err != nil {
		t.Fatalf("NewTopic after the nil-context calls = %v, want the backend open", err)
	}
	h.Close()
}
