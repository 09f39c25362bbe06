package pulsar_test

import (
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
