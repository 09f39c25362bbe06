package pulsar_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// goneSource runs a one-stage pipeline over topic, subscription "sub" from
// initial, with a client made by NewClient whose lines at INFO and above
// go to the returned Lines; it waits for the stage's consumer to
// subscribe.
func goneSource(t *testing.T, e *env, topic string, initial pulsar.SubscriptionInitialPosition) (*received, *logtest.Lines, func() error) {
	t.Helper()
	lines := new(logtest.Lines)
	client, err := bpulsar.NewClient(pulsar.ClientOptions{URL: e.broker.URL(), OperationTimeout: 5 * time.Second},
		slog.New(slog.NewTextHandler(lines, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	src := bpulsar.New(bpulsar.Options{Client: client, Topics: []string{topic}, Subscription: "sub",
		Consumer: pulsar.ConsumerOptions{SubscriptionInitialPosition: initial}, Logger: testLogger()})
	r := newReceived()
	p, stop := run(t, src, 1, producer.Flow{}, recordAll(r))
	wait.Within(t, waitLimit, "the stage's consumer to subscribe", func() bool { return e.connectedCount(topic, "sub", 0) == 1 })
	t.Cleanup(func() {
		if err := p.Err(); err != nil {
			t.Errorf("pipeline error: %v", err)
		}
	})
	return r, lines, stop
}

// handledOnce waits for every message of want to be handled, and for the
// subscription's backlog to empty.
func handledOnce(t *testing.T, e *env, r *received, topic string, want []string) {
	t.Helper()
	wait.Within(t, waitLimit, "the messages handled and acknowledged", func() bool {
		got, _ := r.snapshot()
		for _, m := range want {
			if got[m] == 0 {
				return false
			}
		}
		return e.broker.Backlog(topic, "sub") == 0
	})
}

// stopHandling stops the pipeline and returns how many times each
// message was handled.
func stopHandling(t *testing.T, stop func() error, r *received) map[string]int {
	t.Helper()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got, _ := r.snapshot()
	return got
}

// handledEach checks that every message of got was handled n times.
func handledEach(t *testing.T, got map[string]int, n int) {
	t.Helper()
	for m, k := range got {
		if k != n {
			t.Errorf("%s handled %d times, want %d", m, k, n)
		}
	}
}

// Guarantee: a running stage whose subscription is deleted with force
// (on Latest) keeps running: the client reconnects its consumer, which
// creates the subscription anew at the latest message, so what was
// published while the subscription was gone is never handled, and what is
// published after is.
func TestSubscriptionDeletedUnderARunningSourceOnLatestSkipsWhatWasPublishedMeanwhile(t *testing.T) {
	e := newEnv(t)
	r, _, stop := goneSource(t, e, "gone-latest", pulsar.SubscriptionPositionLatest)
	handledOnce(t, e, r, "gone-latest", e.publish("gone-latest", "before", 3))
	release := e.broker.Withhold(pulsartest.CommandSubscribe)
	if err := e.broker.DeleteSubscription("gone-latest", "sub", true); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, waitLimit, "the client to subscribe again", func() bool { return e.broker.Stats().Withheld == 1 })
	meanwhile := e.publish("gone-latest", "meanwhile", 3)
	release()
	wait.Within(t, waitLimit, "the stage's consumer to subscribe anew", func() bool { return e.connectedCount("gone-latest", "sub", 0) == 1 })
	after := e.publish("gone-latest", "after", 3)
	handledOnce(t, e, r, "gone-latest", after)
	got := stopHandling(t, stop, r)
	for _, m := range meanwhile {
		if got[m] != 0 {
			t.Errorf("%s, published while the subscription was gone, handled %d times, want 0", m, got[m])
		}
	}
	handledEach(t, got, 1)
}

// Guarantee: a running stage whose subscription is deleted with force
// (on Earliest) keeps running and handles every message the topic keeps
// again: each is handled twice, and the new subscription's backlog
// empties.
func TestSubscriptionDeletedUnderARunningSourceOnEarliestHandlesEverythingAgain(t *testing.T) {
	e := newEnv(t)
	r, _, stop := goneSource(t, e, "gone-earliest", pulsar.SubscriptionPositionEarliest)
	want := e.publish("gone-earliest", "m", 5)
	handledOnce(t, e, r, "gone-earliest", want)
	if err := e.broker.DeleteSubscription("gone-earliest", "sub", true); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, waitLimit, "every message handled a second time", func() bool {
		got, _ := r.snapshot()
		for _, m := range want {
			if got[m] < 2 {
				return false
			}
		}
		return e.broker.Backlog("gone-earliest", "sub") == 0
	})
	handledEach(t, stopHandling(t, stop, r), 2)
}

// Guarantee: a running stage whose topic is deleted with force keeps
// running: the client reconnects its consumer, which re-creates the topic
// (empty) and the subscription, and handles what is published to the new
// topic; nothing of the deleted topic is handled again.
func TestTopicDeletedUnderARunningSourceGoesOnWithTheNewTopic(t *testing.T) {
	e := newEnv(t)
	r, _, stop := goneSource(t, e, "gone-topic", pulsar.SubscriptionPositionEarliest)
	handledOnce(t, e, r, "gone-topic", e.publish("gone-topic", "before", 3))
	if err := e.broker.DeleteTopic("gone-topic", true); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, waitLimit, "the stage's consumer to subscribe anew", func() bool { return e.connectedCount("gone-topic", "sub", 0) == 1 })
	handledOnce(t, e, r, "gone-topic", e.publish("gone-topic", "after", 3))
	handledEach(t, stopHandling(t, stop, r), 1)
}

// Guarantee: the broker closing a running stage's consumer (its
// subscription deleted, its topic deleted or unloaded) is said at INFO,
// once: the client's "Broker notification of Closed consumer" line, naming
// the consumer's topic and subscription and the broker's address, and
// nothing more at INFO or above for the reconnection that follows.
func TestAConsumerClosedByTheBrokerIsOneINFOLine(t *testing.T) {
	e := newEnv(t)
	r, lines, stop := goneSource(t, e, "gone-log", pulsar.SubscriptionPositionEarliest)
	handledOnce(t, e, r, "gone-log", e.publish("gone-log", "m", 3))
	if err := e.broker.DeleteSubscription("gone-log", "sub", true); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, waitLimit, "the stage's consumer to subscribe anew", func() bool {
		st := e.broker.Consumers("gone-log", "sub")
		return len(st) == 1 && st[0].Connected
	})
	handledOnce(t, e, r, "gone-log", e.publish("gone-log", "after", 3))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	lines.Want(t, 1, "INFO lines for the consumer the broker closed", "level=INFO", "Broker notification of Closed consumer")
	lines.Want(t, 1, "INFO lines for the consumer the broker closed naming its topic, subscription and broker", "level=INFO",
		"Broker notification of Closed consumer", "topic=persistent://public/default/gone-log ", "subscription=sub ",
		"remote_addr="+e.broker.URL()+" ")
	if n := lines.Count("level=WARN") + lines.Count("level=ERROR"); n != 0 {
		t.Errorf("%d WARN or ERROR lines, want none:\n%v", n, lines.All())
	}
}
