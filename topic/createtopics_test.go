package topic_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// unansweredBackend is the in-memory backend whose NewTopic, like a broker
// that does not answer, waits until ctx ends; entered receives when it has
// started.
type unansweredBackend struct {
	topic.InMemory[int]
	entered chan struct{}
}

func (b unansweredBackend) NewTopic(ctx context.Context, name topic.Name, o topic.Options) (topic.State[int], error) {
	b.entered <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// The broker's lookups and removals, which take no context, do not wait
// for a declaration under way on a backend: Topic, Names and Remove, and
// the Close of a topic already registered, return while another topic's
// backend has not answered; Broker.Close waits for the declaration, so
// that it closes what that registers.
func TestBrokerLookupsDoNotWaitForADeclarationUnderWay(t *testing.T) {
	opts := topic.Options{Mode: topic.BalancedOnly}
	b := topic.NewBroker[int]()
	defer b.Close()
	orders, err := b.CreateInMemoryTopic("orders", opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateInMemoryTopic("audit", opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	entered := make(chan struct{})
	declared := make(chan error, 1)
	go func() {
		_, err := b.CreateTopicsContext(ctx, []topic.Declaration[int]{
			{Name: "payments", Options: opts, Backend: unansweredBackend{entered: entered}},
		})
		declared <- err
	}()
	<-entered
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		b.Topic("orders")
		b.Names()
		b.Remove("audit")
		orders.Close()
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Error("Topic, Names, Remove and Handle.Close waited for another topic's declaration, which its backend has not answered")
	}
	cancel()
	<-returned
	if err := <-declared; !errors.Is(err, context.Canceled) {
		t.Errorf("CreateTopicsContext = %v, want an error wrapping context.Canceled", err)
	}
	if names := b.Names(); len(names) != 0 {
		t.Errorf("Names = %v, want none", names)
	}
}

// gatedDeclaration is the in-memory backend whose NewTopic, once started
// (entered receives), waits until release is closed.
type gatedDeclaration struct {
	topic.InMemory[int]
	entered, release chan struct{}
}

func (b gatedDeclaration) NewTopic(ctx context.Context, name topic.Name, o topic.Options) (topic.State[int], error) {
	b.entered <- struct{}{}
	<-b.release
	return b.InMemory.NewTopic(ctx, name, o)
}

// Broker.Close closes the topics a declaration under way registers: it
// waits for the declaration rather than leave them open.
func TestBrokerCloseClosesTheTopicsOfADeclarationUnderWay(t *testing.T) {
	b := topic.NewBroker[int]()
	be := gatedDeclaration{entered: make(chan struct{}), release: make(chan struct{})}
	declared := make(chan *topic.Handle[int], 1)
	go func() {
		h, err := b.CreateTopic("payments", topic.Options{Mode: topic.BalancedOnly}, be)
		if err != nil {
			t.Error(err)
		}
		declared <- h
	}()
	<-be.entered
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		b.Close()
	}()
	select {
	case <-closed: // the declaration then registers its topic after Close
	case <-time.After(100 * time.Millisecond): // Close is waiting for it
	}
	close(be.release)
	<-closed
	h := <-declared
	if names := b.Names(); len(names) != 0 {
		t.Errorf("Names after Close = %v, want none", names)
	}
	if h != nil {
		if err := h.Publish(t.Context(), 1); !errors.Is(err, topic.ErrTopicClosed) {
			t.Errorf("Publish on the topic declared as Close began = %v, want ErrTopicClosed", err)
		}
		h.Close()
	}
}

// A closed broker declares no topic: nothing would close one it
// registered, so CreateTopic and CreateTopics refuse with ErrBrokerClosed.
func TestAClosedBrokerRefusesNewTopics(t *testing.T) {
	b := topic.NewBroker[int]()
	b.Close()
	opts := topic.Options{Mode: topic.BalancedOnly}
	h, err := b.CreateTopic("orders", opts, nil)
	if h != nil {
		h.Close()
	}
	if !errors.Is(err, topic.ErrBrokerClosed) || h != nil {
		t.Errorf("CreateTopic after Close = (topic made: %t), %v, want no topic and an error wrapping ErrBrokerClosed", h != nil, err)
	}
	hs, err := b.CreateTopics([]topic.Declaration[int]{{Name: "payments", Options: opts}})
	if !errors.Is(err, topic.ErrBrokerClosed) || hs != nil {
		t.Errorf("CreateTopics after Close = %d topics, %v, want none and an error wrapping ErrBrokerClosed", len(hs), err)
	}
	if names := b.Names(); len(names) != 0 {
		t.Errorf("Names after Close and the declarations = %v, want none", names)
	}
	for _, h := range hs {
		h.Close()
	}
	b.Close() // a second Close is allowed
}

// Guarantee: two Closes of a broker called at once both return only once
// every topic is closed: after either returns, each topic refuses a
// publish with ErrTopicClosed.
func TestConcurrentBrokerClosesBothReturnOnceEveryTopicIsClosed(t *testing.T) {
	for range 20 {
		b := topic.NewBroker[int]()
		var hs []*topic.Handle[int]
		for i := range 200 {
			h, err := b.CreateInMemoryTopic(topic.Name(fmt.Sprint("orders-", i)), topic.Options{Mode: topic.BalancedOnly})
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				b.Close()
				for _, h := range hs {
					if err := h.Publish(t.Context(), 1); !errors.Is(err, topic.ErrTopicClosed) {
						t.Errorf("Publish into %s once a Close returned = %v, want ErrTopicClosed", h.Name(), err)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}
