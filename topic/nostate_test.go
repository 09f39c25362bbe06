package topic_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
)

// emptyBackend is the in-memory backend whose NewTopic, or whose topics'
// Subscribe, answers with neither a state nor an error: a nil interface,
// or a nil pointer in one when typedNil is set.
type emptyBackend struct {
	topic.InMemory[int]
	emptyTopic bool
	typedNil   bool
}

func (b emptyBackend) Name() string { return "empty" }

func (b emptyBackend) NewTopic(ctx context.Context, name topic.Name, o topic.Options) (topic.State[int], error) {
	if b.emptyTopic {
		if b.typedNil {
			return (*emptySubscribe)(nil), nil
		}
		return nil, nil
	}
	st, err := b.InMemory.NewTopic(ctx, name, o)
	if err != nil {
		return nil, err
	}
	return emptySubscribe{st, b.typedNil}, nil
}

type emptySubscribe struct {
	topic.State[int]
	typedNil bool
}

type nilSubscription struct{ topic.SubscriptionState[int] }

func (e emptySubscribe) Subscribe(context.Context, topic.SubscriptionMode, topic.SubscriberOptions) (topic.SubscriptionState[int], error) {
	if e.typedNil {
		return (*nilSubscription)(nil), nil
	}
	return nil, nil
}

// wantNoBackendState checks that err is a *TopicError naming the topic,
// wrapping ErrNoBackendState and naming the backend and its method.
func wantNoBackendState(t *testing.T, err error, method string) {
	t.Helper()
	var te *topic.TopicError
	if !errors.As(err, &te) || te.Topic != "orders" || !errors.Is(err, topic.ErrNoBackendState) {
		t.Fatalf("err = %v, want a *TopicError for topic orders wrapping ErrNoBackendState", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `backend "empty"`) || !strings.Contains(msg, method) {
		t.Errorf("err = %q, want it to name the backend and %s", msg, method)
	}
}

// A backend that breaks its contract by answering NewTopic with neither a
// state nor an error gets the topic refused with an error naming it, and
// nothing registered, rather than a topic that fails every later call.
func TestABackendAnsweringNewTopicWithNothingIsRefused(t *testing.T) {
	for _, typedNil := range []bool{false, true} {
		b := topic.NewBroker[int]()
		_, err := b.CreateTopic("orders", topic.Options{Mode: topic.BalancedOnly}, emptyBackend{emptyTopic: true, typedNil: typedNil})
		wantNoBackendState(t, err, "NewTopic")
		if _, ok := b.Topic("orders"); ok {
			t.Error("the topic was registered")
		}
		_, err = topic.NewTopic[int]("orders", topic.Options{Mode: topic.BalancedOnly}, emptyBackend{emptyTopic: true, typedNil: typedNil})
		wantNoBackendState(t, err, "NewTopic")
	}
}

// A backend whose Subscribe answers with neither a subscription nor an
// error gets the subscription refused with an error naming it.
func TestABackendAnsweringSubscribeWithNothingIsRefused(t *testing.T) {
	for _, typedNil := range []bool{false, true} {
		h, err := topic.NewTopic[int]("orders", topic.Options{Mode: topic.BalancedOnly}, emptyBackend{typedNil: typedNil})
		if err != nil {
			t.Fatal(err)
		}
		sub, err := h.Subscribe(t.Context(), topic.Balanced("billing"), topic.SubscriberOptions{})
		if sub != nil {
			t.Errorf("Subscribe returned a subscription %v with its error", sub)
		}
		wantNoBackendState(t, err, "Subscribe")
		h.Close()
	}
}
