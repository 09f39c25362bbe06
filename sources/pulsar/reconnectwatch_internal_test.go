package pulsar

import (
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/boulevard-go/boulevard/internal/redact"
)

// stageReports records what a reconnection watch reports to its stage.
type stageReports struct {
	mu       sync.Mutex
	degraded bool
	degrades int
}

func (s *stageReports) Degrade(error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.degraded = true
	s.degrades++
}

func (s *stageReports) Recovered() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.degraded = false
}

func (s *stageReports) state() (degraded bool, degrades int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.degraded, s.degrades
}

// watchedClient returns the logger a client made by NewClient gives its
// consumers, and its lastFailure, on which a watch of the consumers named
// name reports to the returned stage until the returned unwatch.
func watchedClient(name string) (plog.Logger, *lastFailure, *stageReports, *reconnectWatch, func()) {
	last := new(lastFailure)
	l, _ := clientLogger(slog.New(slog.DiscardHandler), last, redact.Secrets{})
	st := new(stageReports)
	w := newReconnectWatch(st)
	return l, last, st, w, last.watch(name, w)
}

// partitionLog is the logger the client gives the partition consumer id
// of the stage's consumers named name.
func partitionLog(l plog.Logger, name string, id uint64) plog.Logger {
	return l.SubLogger(plog.Fields{"name": name, "topic": "persistent://public/default/orders-partition-0",
		"subscription": "billing", "consumerID": id})
}

// Guarantee: a consumer that closes while it fails to reconnect (one of
// a subscribe the stage gave up on, or of an earlier run, that carries
// the stage's consumer name) no longer holds the stage degraded: once
// every consumer that held it so has reconnected or closed, the stage
// runs again.
func TestConsumerClosedWhileFailingToReconnectReleasesTheStage(t *testing.T) {
	const name = "orders.producer.0-1a2b3c4d"
	l, _, st, _, unwatch := watchedClient(name)
	defer unwatch()
	refused := errors.New("dial tcp 10.0.0.1:6650: connect: connection refused")
	stale, live := partitionLog(l, name, 7), partitionLog(l, name, 8)
	for range ReconnectFailuresToDegrade {
		stale.WithError(refused).Error(failedReconnect)
		live.WithError(refused).Error(failedReconnect)
	}
	if degraded, _ := st.state(); !degraded {
		t.Fatal("stage not degraded after its consumers failed to reconnect")
	}
	stale.Infof("Closing consumer=%d", 7)
	if degraded, _ := st.state(); !degraded {
		t.Fatal("stage running while one of its consumers still fails to reconnect")
	}
	live.Info(reconnectedConsumer)
	if degraded, _ := st.state(); degraded {
		t.Fatal("stage still degraded after one consumer closed and the other reconnected")
	}

	// A consumer that closes alone, with no other down, releases it too.
	for range ReconnectFailuresToDegrade {
		stale.WithError(refused).Error(failedReconnect)
	}
	stale.Infof("Closing consumer=%d", 7)
	if degraded, _ := st.state(); degraded {
		t.Fatal("stage still degraded after the only consumer failing to reconnect closed")
	}
}

// Guarantee: a line about a consumer that the client logs as the stage's
// run ends (handled by a watch looked up before the run let go of it)
// reports nothing to the stage once the run has let go of the watch, so
// that it cannot degrade the stage's next run, which that run's own
// watch would then never see recover.
func TestEndedWatchReportsNothingToTheStage(t *testing.T) {
	const name = "orders.producer.0-1a2b3c4d"
	_, last, st, w, unwatch := watchedClient(name)
	if last.watchOf(name) != w {
		t.Fatal("watch not registered")
	}
	unwatch()
	for range ReconnectFailuresToDegrade {
		w.failed("persistent://public/default/orders#7", "connection refused")
	}
	if _, n := st.state(); n != 0 {
		t.Fatalf("an ended watch reported the stage degraded %d times", n)
	}
}

// Guarantee: WatchReconnects reports to what it is given, by the
// client's lines about the consumers of the name it watches, until
// unwatch; a client made with a Logger of its own watches too (NewClient
// reads the lines it hands that Logger); no client watches nothing and
// says so.
func TestWatchReconnectsReportsUntilUnwatchedOnAClientThatCanTell(t *testing.T) {
	const name = "orders-broadcast-1a2b3c4d"
	last := new(lastFailure)
	l, _ := clientLogger(slog.New(slog.DiscardHandler), last, redact.Secrets{})
	st := new(stageReports)
	unwatch, ok := (&Client{last: last}).WatchReconnects(name, st)
	if !ok {
		t.Fatal("WatchReconnects on a client made by NewClient watches nothing")
	}
	cons := partitionLog(l, name, 3)
	refused := errors.New("dial tcp 10.0.0.1:6650: connect: connection refused")
	for range ReconnectFailuresToDegrade {
		cons.WithError(refused).Error(failedReconnect)
	}
	if degraded, _ := st.state(); !degraded {
		t.Fatal("not degraded after the consumer failed to reconnect")
	}
	cons.Info(reconnectedConsumer)
	if degraded, _ := st.state(); degraded {
		t.Fatal("still degraded once the consumer reconnected")
	}
	unwatch()
	for range ReconnectFailuresToDegrade {
		cons.WithError(refused).Error(failedReconnect)
	}
	if _, degrades := st.state(); degrades != 1 {
		t.Fatalf("%d degrades, want 1: a report came after unwatch", degrades)
	}
	own, err := NewClient(pulsar.ClientOptions{URL: "pulsar://127.0.0.1:1", Logger: plog.NewLoggerWithSlog(slog.New(slog.DiscardHandler))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	unwatchOwn, ok := own.WatchReconnects(name, st)
	if !ok {
		t.Error("WatchReconnects on a client with a Logger of its own says it watches nothing")
	}
	unwatchOwn()
	if _, ok := (*Client)(nil).WatchReconnects(name, st); ok {
		t.Error("WatchReconnects on a nil client, whose lines it cannot read, says it watches")
	}
}

// Guarantee: WatchConsumer gives the consumer a backend is about to make a
// name of its own (its subscription's, with a suffix of the process's) and watches
// it on a client that can tell, so that two subscribers of one
// subscription never share a watch; on a client that cannot tell, or
// without an observer, it leaves the options as they were; without
// options it watches nothing, and its unwatch does nothing.
func TestWatchConsumerNamesAndWatchesOnlyWhereItCanTell(t *testing.T) {
	last := new(lastFailure)
	l, _ := clientLogger(slog.New(slog.DiscardHandler), last, redact.Secrets{})
	st := new(stageReports)
	c := &Client{last: last}
	var a, b pulsar.ConsumerOptions
	a.SubscriptionName, b.SubscriptionName = "billing", "billing"
	unwatchA, unwatchB := WatchConsumer(c, &a, st), WatchConsumer(c, &b, new(stageReports))
	defer unwatchA()
	defer unwatchB()
	if !strings.HasPrefix(a.Name, "billing-") || a.Name == b.Name {
		t.Fatalf("consumer names %q and %q, want two distinct names after the subscription", a.Name, b.Name)
	}
	cons := partitionLog(l, a.Name, 0)
	for range ReconnectFailuresToDegrade {
		cons.WithError(errors.New("connection refused")).Error(failedReconnect)
	}
	if degraded, _ := st.state(); !degraded {
		t.Fatal("the watched consumer failed to reconnect and its observer heard nothing")
	}
	for what, w := range map[string]struct {
		c pulsar.Client
		d Degrader
	}{"a client that cannot tell": {&Client{}, st}, "no observer": {c, nil}} {
		co := pulsar.ConsumerOptions{SubscriptionName: "billing"}
		WatchConsumer(w.c, &co, w.d)()
		if co.Name != "" {
			t.Errorf("with %s, WatchConsumer named the consumer %q", what, co.Name)
		}
	}
	unwatch := WatchConsumer(c, nil, st)
	unwatch()
	unwatch()
}

// Guarantee: a watch that ended reports no recovery either: a consumer
// that reconnects once its run let go of the watch tells that run's
// stage nothing.
func TestEndedWatchReportsNoRecoveryToTheStage(t *testing.T) {
	const name, key = "orders.producer.0-1a2b3c4d", "persistent://public/default/orders#7"
	_, _, st, w, unwatch := watchedClient(name)
	for range ReconnectFailuresToDegrade {
		w.failed(key, "connection refused")
	}
	if degraded, _ := st.state(); !degraded {
		t.Fatal("the stage was not degraded")
	}
	unwatch()
	w.settled(key)
	if degraded, _ := st.state(); !degraded {
		t.Error("an ended watch reported the stage recovered")
	}
}

// Guarantee: a later watch of a name replaces the earlier, and the
// earlier's unwatch leaves the later registered.
func TestUnwatchLeavesALaterWatchOfTheSameName(t *testing.T) {
	const name = "orders-broadcast-1a2b3c4d"
	last := new(lastFailure)
	first, second := newReconnectWatch(new(stageReports)), newReconnectWatch(new(stageReports))
	unwatchFirst := last.watch(name, first)
	unwatchSecond := last.watch(name, second)
	defer unwatchSecond()
	unwatchFirst()
	if last.watchOf(name) != second {
		t.Error("the earlier watch's unwatch removed the later watch of the same name")
	}
}

// Guarantee: the client keeps a count of failed reconnections for the
// subscriptions its Sources consume only: the failures of consumers of
// other subscriptions (broadcast subscribers named at random, coming and
// going) leave nothing behind, while a Source's subscription still
// counts each failed attempt.
func TestOnlyTheSubscriptionsOfSourcesKeepAReconnectionCount(t *testing.T) {
	last := new(lastFailure)
	c := &Client{last: last}
	src := New(Options{Client: c, Subscription: "billing"})
	l, _ := clientLogger(slog.New(slog.DiscardHandler), last, redact.Secrets{})
	refused := errors.New("dial tcp 10.0.0.1:6650: connect: connection refused")
	fail := func(sub string) {
		l.SubLogger(plog.Fields{"topic": "persistent://public/default/orders", "subscription": sub, "consumerID": 1}).
			WithError(refused).Error(failedReconnect)
	}
	const subs = 1000
	for i := range subs {
		fail("broadcast-" + strconv.Itoa(i))
	}
	fail("billing")
	fail("billing")
	if n := src.Stats().ReconnectFailures; n != 2 {
		t.Errorf("the source's subscription counts %d failed reconnections, want 2", n)
	}
	last.mu.Lock()
	n := len(last.reconnects)
	last.mu.Unlock()
	if n != 1 {
		t.Fatalf("after the consumers of %d other subscriptions failed to reconnect, the client counts for %d subscriptions, want 1 (the source's)", subs, n)
	}
}
