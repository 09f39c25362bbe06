package topic_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
)

// closeCounting is the in-memory backend whose topics count their Close,
// and whose NewTopic fails with refuse when it is set.
type closeCounting struct {
	topic.InMemory[int]
	closed *atomic.Int32
	refuse error
}

func (b closeCounting) NewTopic(ctx context.Context, name topic.Name, o topic.Options) (topic.State[int], error) {
	if b.refuse != nil {
		return nil, b.refuse
	}
	st, err := b.InMemory.NewTopic(ctx, name, o)
	if err != nil {
		return nil, err
	}
	return closeCounted{st, b.closed}, nil
}

type closeCounted struct {
	topic.State[int]
	closed *atomic.Int32
}

func (c closeCounted) Close() {
	c.closed.Add(1)
	c.State.Close()
}

// CreateTopics is all or none: when a declaration fails, the topics its
// backends already made for the declarations before it are closed, and
// none is registered.
func TestCreateTopicsClosesTheTopicsMadeBeforeAFailingOne(t *testing.T) {
	var closed atomic.Int32
	refused := errors.New("refused")
	opts := topic.Options{Mode: topic.BalancedOnly}
	b := topic.NewBroker[int]()
	defer b.Close()
	_, err := b.CreateTopics([]topic.Declaration[int]{
		{Name: "orders", Options: opts, Backend: closeCounting{closed: &closed}},
		{Name: "payments", Options: opts, Backend: closeCounting{closed: &closed}},
		{Name: "audit", Options: opts, Backend: closeCounting{closed: &closed, refuse: refused}},
	})
	var te *topic.TopicError
	if !errors.Is(err, refused) || !errors.As(err, &te) || te.Topic != "audit" {
		t.Fatalf("CreateTopics = %v, want a *TopicError for audit wrapping the backend's refusal", err)
	}
	if n := closed.Load(); n != 2 {
		t.Errorf("closed %d of the 2 topics made before the failing declaration, want both", n)
	}
	if names := b.Names(); len(names) != 0 {
		t.Errorf("topics registered despite the failure: %v", names)
	}
}
