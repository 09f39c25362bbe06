package pulsar_test

import (
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// With several topics, one consumer closed while its stage has no permits
// fails the whole stage (not just its own receive loop): every consumer of
// the stage is replaced and nothing of either topic is lost.
func TestClosedConsumerFailsMultiTopicStage(t *testing.T) {
	e := newEnv(t)
	topics := []string{"starved-a", "starved-b"}
	var want []string
	for _, tp := range topics {
		want = append(want, e.publish(tp, tp, 300)...)
	}
	r := newReceived()
	g := newGate()
	handle := recordAfter(g, r)
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: topics, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	start(t, pipeline.Options[[]byte, []byte]{
		Name:       "starved-multi",
		Logger:     testLogger(),
		Producer:   producer.Options[[]byte]{Source: src, Flow: producer.Flow{Initial: 10}, Restart: producer.Restart{Backoff: 20 * time.Millisecond}},
		Processors: processor.Options[[]byte, []byte]{Concurrency: 1, Handle: handle},
	})
	defer g.open()
	// Both consumers run out of permits: dispatch stops on both topics.
	last := map[string]int64{}
	stable := 0
	wait.Within(t, waitLimit, "dispatch to stop on both topics", func() bool {
		changed := false
		for _, tp := range topics {
			cs := e.broker.Consumers(tp, "sub")
			if len(cs) != 1 || cs[0].Dispatched == 0 {
				return false
			}
			if cs[0].Dispatched != last[tp] {
				last[tp], changed = cs[0].Dispatched, true
			}
		}
		if changed {
			stable = 0
		} else {
			stable++
		}
		return stable >= 20
	})
	if !src.CloseConsumerForTest() {
		t.Fatal("no open consumer to close")
	}
	wait.Within(t, waitLimit, "the stage to replace both consumers while the handler is stuck", func() bool { return src.Stats().Replaced == int64(len(topics)) })
	g.open()
	wait.Within(t, waitLimit, "every message of both topics handled", func() bool { return r.distinct() == len(want) })
	for _, tp := range topics {
		wait.Within(t, waitLimit, "the backlog of "+tp+" to empty", func() bool { return e.broker.Backlog(tp, "sub") == 0 })
	}
}

// Guarantee: a stage whose subscribe to one of its topics fails closes the
// consumers it had subscribed to its other topics before it is restarted:
// however often it restarts, it holds at most one consumer of each topic.
func TestAStageFailingToSubscribeOneTopicClosesItsOtherConsumers(t *testing.T) {
	e := newEnv(t)
	e.broker.RefuseSubscribe("refused", "sub", errors.New("not now"))
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"accepted", "refused"}, Subscription: "sub",
		SubscriptionType: bpulsar.Shared, Consumer: earliest(), Logger: testLogger()})
	start(t, pipeline.Options[[]byte, []byte]{
		Name:   "half-subscribed",
		Logger: testLogger(),
		Producer: producer.Options[[]byte]{Source: src,
			Restart: producer.Restart{MaxRestarts: 100, Window: time.Minute, Backoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}},
		Processors: processor.Options[[]byte, []byte]{Handle: recordAll(newReceived())},
	})
	wait.Within(t, waitLimit, "three subscribes to the accepted topic", func() bool { return len(e.broker.Consumers("accepted", "sub")) >= 3 })
	if n := e.connectedCount("accepted", "sub", 0); n > 1 {
		t.Errorf("%d consumers of the accepted topic connected after %d subscribes, want at most 1 (the current run's)",
			n, len(e.broker.Consumers("accepted", "sub")))
	}
}
