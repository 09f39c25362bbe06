package topic_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a Binding without a handle (the zero Binding, which Get returns
// for an alias that is not bound) refuses to publish with ErrNoHandle
// rather than panicking, and Bind refuses one with the same sentinel.
func TestBindingWithoutAHandleReturnsErrNoHandle(t *testing.T) {
	b, ok := topic.NewTopicSet[int]().Get("missing")
	if ok {
		t.Fatal("Get found an alias that was never bound")
	}
	if _, err := b.Publish(testCtx(t), 1); !errors.Is(err, topic.ErrNoHandle) {
		t.Errorf("Publish on the zero Binding = %v, want ErrNoHandle", err)
	}
	if p, err := b.Tracked(); p != nil || !errors.Is(err, topic.ErrNoHandle) {
		t.Errorf("Tracked on the zero Binding = %v, %v, want nil, ErrNoHandle", p, err)
	}
	if err := topic.NewTopicSet[int]().Bind("out", b); !errors.Is(err, topic.ErrNoHandle) {
		t.Errorf("Bind of the zero Binding = %v, want ErrNoHandle", err)
	}
}

// Guarantee: the zero Broker and the zero TopicSet are empty and ready to
// use, and a nil *TopicSet (a pipeline that is not wired) reads as an
// empty set; none of them panics.
func TestZeroBrokerAndTopicSetAreReadyToUse(t *testing.T) {
	var br topic.Broker[int]
	h, err := br.CreateInMemoryTopic("t", topic.Options{})
	if err != nil {
		t.Fatalf("CreateInMemoryTopic on the zero Broker: %v", err)
	}
	t.Cleanup(br.Close)
	if got, ok := br.Topic("t"); !ok || got != h {
		t.Errorf("Topic(t) = %v, %v, want the topic just created", got, ok)
	}

	var set topic.TopicSet[int]
	if err := set.Bind("out", topic.Binding[int]{Handle: h}); err != nil {
		t.Fatalf("Bind on the zero TopicSet: %v", err)
	}
	if b, ok := set.Get("out"); !ok || b.Handle != h {
		t.Errorf("Get(out) = %+v, %v, want the bound handle", b, ok)
	}

	var none *topic.TopicSet[int]
	if _, ok := none.Get("out"); ok {
		t.Error("Get on a nil TopicSet found an alias")
	}
	if none.Remove("out") {
		t.Error("Remove on a nil TopicSet removed an alias")
	}
	if a := none.Aliases(); len(a) != 0 {
		t.Errorf("Aliases of a nil TopicSet = %v, want none", a)
	}
}

// Guarantee: a TopicSet may be used from several goroutines at once: of
// the binds of one alias exactly one succeeds, the others return
// ErrAliasExists, and every alias bound alone is kept, while others read
// and remove aliases.
func TestATopicSetUsedFromSeveralGoroutinesAtOnceBindsEachAliasOnce(t *testing.T) {
	h, err := topic.NewTopic[int]("t", topic.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	set := topic.NewTopicSet[int]()
	const binders = 16
	var wg sync.WaitGroup
	var won atomic.Int32
	for i := range binders {
		wg.Go(func() {
			switch err := set.Bind("shared", topic.Binding[int]{Handle: h}); {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, topic.ErrAliasExists):
				t.Errorf("Bind(shared) = %v, want nil or ErrAliasExists", err)
			}
			if err := set.Bind(fmt.Sprint("own-", i), topic.Binding[int]{Handle: h}); err != nil {
				t.Errorf("Bind(own-%d) = %v", i, err)
			}
		})
		wg.Go(func() {
			_, _ = set.Get("shared")
			_ = set.Aliases()
			set.Remove("other")
		})
	}
	wg.Wait()
	if n := won.Load(); n != 1 {
		t.Errorf("%d binds of one alias succeeded, want 1", n)
	}
	if got := set.Aliases(); len(got) != binders+1 {
		t.Errorf("aliases %v, want shared and own-0 to own-%d", got, binders-1)
	}
}
