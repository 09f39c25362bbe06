// Package topictest is the conformance suite for topic backends: every
// guarantee of the topic layer as one subtest, run against the topics a
// backend creates through a [topic.Broker].
//
// A backend package runs it from a test:
//
//	func TestConformance(t *testing.T) {
//		topictest.Run(t, func() topic.Backend[int] { return mybackend.New[int]() })
//	}
//
// A subtest is skipped only for a capability the backend does not
// declare (a feature, mode or policy of [topic.Capabilities]), with a
// reason naming it; the last subtest, SkipsMatchCapabilities, fails unless
// the capabilities that caused skips are exactly the ones the backend does
// not declare. Backends that need per-subtest cleanup (an in-process broker
// to stop) use [RunWith].
package topictest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
)

// Run runs the conformance suite. newBackend is called once per subtest.
// Set TOPICTEST_SCALE (an integer ≥ 1) to multiply the message counts of
// the concurrency tests.
func Run(t *testing.T, newBackend func() topic.Backend[int]) {
	RunWith(t, func(*testing.T) topic.Backend[int] { return newBackend() })
}

// RunWith is [Run] with newBackend given the subtest, so that it can
// register cleanups (t.Cleanup) for what it starts. It is called once per
// subtest, and once more for SkipsMatchCapabilities.
func RunWith(t *testing.T, newBackend func(t *testing.T) topic.Backend[int]) {
	rec := &skips{seen: make(map[string]bool)}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec.mu.Lock()
			rec.ran++
			rec.mu.Unlock()
			s := newSuite(t, newBackend, rec)
			for _, f := range c.needs {
				if !s.backend.Capabilities().Has(f) {
					s.skip("feature " + f.String())
				}
			}
			c.run(s)
		})
	}
	// Every skip above named a capability the backend does not declare,
	// and every capability it does not declare skipped some subtest.
	t.Run("SkipsMatchCapabilities", func(t *testing.T) {
		rec.mu.Lock()
		ran := rec.ran
		rec.mu.Unlock()
		if ran < len(cases) {
			t.Skipf("only %d of %d subtests ran (go test -run): the skip set is incomplete", ran, len(cases))
		}
		be := newBackend(t)
		want := unsupported(be.Capabilities())
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for k := range rec.seen {
			if !want[k] {
				t.Errorf("a subtest was skipped for %s, which the backend declares", k)
			}
		}
		for k := range want {
			if !rec.seen[k] {
				t.Errorf("the backend does not declare %s, but no subtest was skipped for it", k)
			}
		}
	})
}

// skips records the capabilities that caused subtests to skip.
type skips struct {
	mu   sync.Mutex
	seen map[string]bool
	ran  int // subtests entered
}

// unsupported names every feature, mode and policy c does not declare, as
// the suite's skip reasons name them.
func unsupported(c topic.Capabilities) map[string]bool {
	out := make(map[string]bool)
	for _, f := range topic.Features() {
		if !c.Has(f) {
			out["feature "+f.String()] = true
		}
	}
	add := func(what string, declared bool, value string) {
		if !declared {
			out[what+" "+value] = true
		}
	}
	for _, m := range []topic.Mode{topic.BalancedOnly, topic.BroadcastOnly, topic.Mixed} {
		add("mode", slices.Contains(c.Modes, m), m.String())
	}
	for _, v := range []topic.OnFull{topic.Block, topic.DropNewest} {
		add("balanced.on_full", slices.Contains(c.OnFull, v), v.String())
	}
	for _, v := range []topic.OnLag{topic.DropOldest, topic.Disconnect} {
		add("broadcast.on_lag", slices.Contains(c.OnLag, v), v.String())
	}
	for _, v := range []topic.AckMode{topic.AckFirst, topic.AckAll} {
		add("broadcast.ack_mode", slices.Contains(c.AckModes, v), v.String())
	}
	for _, v := range []topic.PropagationMode{topic.PropagationDisabled, topic.PropagationAuto} {
		add("ack_propagation.mode", slices.Contains(c.Propagation, v), v.String())
	}
	return out
}

// unsupportedIn names every setting of o that c does not declare, in the
// words of [unsupported]; the settings a mode does not use are not
// looked at, as topic.CheckCapabilities does.
func unsupportedIn(c topic.Capabilities, o topic.Options) []string {
	var out []string
	add := func(what string, declared bool, value string) {
		if !declared {
			out = append(out, what+" "+value)
		}
	}
	add("mode", slices.Contains(c.Modes, o.Mode), o.Mode.String())
	if o.Mode != topic.BroadcastOnly {
		add("balanced.on_full", slices.Contains(c.OnFull, o.Balanced.OnFull), o.Balanced.OnFull.String())
	}
	if o.Mode != topic.BalancedOnly {
		add("broadcast.on_lag", slices.Contains(c.OnLag, o.Broadcast.OnLag), o.Broadcast.OnLag.String())
		add("broadcast.ack_mode", slices.Contains(c.AckModes, o.Broadcast.AckMode), o.Broadcast.AckMode.String())
	}
	add("ack_propagation.mode", slices.Contains(c.Propagation, o.AckPropagation.Mode), o.AckPropagation.Mode.String())
	return out
}

type testCase struct {
	name  string
	needs []topic.Feature // skipped unless the backend declares every one
	run   func(s *suite)
}

var cases = []testCase{
	// Names: empty topic and group names are rejected everywhere.
	{"EmptyNamesRejected", nil, testEmptyNames},
	// Broker: create, lookup, sorted list, remove-and-close, close-all.
	{"BrokerLifecycle", nil, testBrokerLifecycle},
	// Broker: CreateTopics is atomic, a bad declaration inserts nothing.
	{"CreateTopicsAtomic", nil, testCreateTopicsAtomic},
	// TopicSet.Remove detaches the alias only; the topic stays open.
	{"TopicSetRemoveDoesNotClose", nil, testTopicSetRemove},
	// Explicit mode-mismatch errors on subscribe.
	{"ModeMismatchErrors", nil, testModeMismatch},
	// Balanced: within a group each message goes to exactly one subscriber, under concurrency.
	{"BalancedExactlyOnceConcurrent", nil, testExactlyOnce},
	// Each subscriber receives one publisher's messages in publish order.
	{"OrderPerSubscriber", nil, testOrder},
	// Different balanced groups each receive the whole stream independently.
	{"IndependentGroups", nil, testIndependentGroups},
	// Balanced publish waits under backpressure and publishes nothing when cancelled.
	{"Backpressure", []topic.Feature{topic.FeatureGroupBackpressure}, testBackpressure},
	// TryPublish and on_full drop_newest report DroppedOnFull and deliver nothing.
	{"DropOnFull", []topic.Feature{topic.FeatureGroupBackpressure}, testDropOnFull},
	// TryPublish and on_full drop_newest publish, and deliver, while there is room: on every backend, full or never full.
	{"TryPublishWithRoomDelivers", nil, testTryPublishWithRoom},
	// Broadcast drop_oldest: a slow subscriber gets Lagged{Missed} and continues from the oldest retained message; the fast one and the publisher are unaffected.
	{"LagDropOldest", []topic.Feature{topic.FeatureBroadcastCapacity}, testLagDropOldest},
	// Broadcast disconnect: a slow subscriber gets one final Lagged, then ErrSubscriptionClosed.
	{"LagDisconnect", []topic.Feature{topic.FeatureBroadcastCapacity}, testLagDisconnect},
	// Broadcast under concurrency: each subscriber's messages plus its lag notices account for every message once, in order.
	{"LagAccountingConcurrent", []topic.Feature{topic.FeatureBroadcastCapacity}, testLagAccounting},
	// Mixed: TryPublish is all-or-nothing across groups and broadcast.
	{"MixedTryPublishAllOrNothing", []topic.Feature{topic.FeatureGroupBackpressure}, testMixedAllOrNothing},
	// Mixed: a publish blocked on one full group delivers nowhere and holds no room in the others while it waits.
	{"MixedBlockedPublishHoldsNothing", []topic.Feature{topic.FeatureGroupBackpressure}, testMixedBlocked},
	// Mixed under concurrency: blocked publishers never lose a wakeup, and every group and broadcast subscriber gets every message once.
	{"MixedBackpressureConcurrent", nil, testMixedConcurrent},
	// A cancelled publish delivers nothing anywhere.
	{"CancelledPublishDeliversNothing", []topic.Feature{topic.FeatureGroupBackpressure}, testCancelledPublish},
	// A publish whose context is already done returns its error and delivers nothing anywhere.
	{"CancelledContextPublishesNothing", nil, testCancelledContext},
	// A subscribe whose context has ended returns its error and subscribes nothing: no group, no subscriber, nothing delivered.
	{"EndedContextSubscribesNothing", nil, testSubscribeEndedContext},
	// No replay: a late subscriber only sees messages published after it subscribed.
	{"NoReplayForLateSubscribers", nil, testNoReplay},
	// Close: publish fails, receivers drain then see ErrSubscriptionClosed, subscribe is refused, waiters wake.
	{"CloseSemantics", nil, testClose},
	// Subscription Close: a Receive waiting on the subscription returns ErrSubscriptionClosed; Closes called together all return; the topic stays open.
	{"SubscriptionCloseWakesItsReceive", nil, testSubscriptionClose},
	// Tracked: an ack resolves the receipt as Acked.
	{"TrackedAck", nil, testTrackedAck},
	// Tracked: a nack resolves as Nacked with the subscriber's reason.
	{"TrackedNackWithReason", nil, testTrackedNack},
	// Tracked: no outcome within the timeout resolves as TimedOut.
	{"TrackedTimedOut", nil, testTrackedTimeout},
	// Tracked: closing the topic resolves pending receipts as TopicClosed.
	{"TrackedTopicClosed", nil, testTrackedTopicClosed},
	// Tracked: max_in_flight bounds pending publishes; TryPublish reports MaxInFlightReached.
	{"TrackedMaxInFlight", nil, testTrackedMaxInFlight},
	// Tracked: ack/nack of untracked, unknown or already-resolved messages returns ErrMessageNotTracked.
	{"AckNotTracked", nil, testAckNotTracked},
	// Tracked: a delivery dropped without an ack nacks the publish.
	{"DroppedDeliveryNacks", []topic.Feature{topic.FeatureBroadcastCapacity}, testDroppedDelivery},
	// Tracked: a publish that reaches no subscriber is nacked at once.
	{"NoSubscriberNacks", nil, testNoSubscriber},
	// Tracked: callback form, DropNewest publisher, and closing the publisher.
	{"TrackedFuncAndClose", nil, testTrackedFuncAndClose},
	// ack_mode first: the first recipient outcome wins.
	{"AckFirstWins", nil, testAckFirst},
	// ack_mode all: Acked only after every subscriber eligible at publish time acked.
	{"AckAllWaitsForEveryEligible", nil, testAckAllEvery},
	// ack_mode all: any required nack resolves as Nacked with its reason.
	{"AckAllAnyNack", nil, testAckAllNack},
	// ack_mode all: an eligible subscriber leaving (or disconnected for lag) before acking resolves as Nacked.
	{"AckAllSubscriberLeaves", nil, testAckAllLeaves},
	// ack_mode all: an empty eligible set resolves at once as Nacked.
	{"AckAllEmptyEligibleSet", nil, testAckAllEmpty},
	// ack_mode all: a second ack (or a nack) of one delivery by the same subscriber is refused and does not count toward the eligible set.
	{"AckAllDuplicateAckCountsOnce", nil, testAckAllDuplicateAck},
	// ack_mode all is rejected at creation without propagation auto, without on_lag disconnect, and on mixed or balanced-only topics.
	{"AckAllStartupRejections", nil, testAckAllRejections},
	// Stats: groups, broadcast subscribers, published, dropped, lagged, in-flight.
	{"Stats", []topic.Feature{topic.FeatureGroupBackpressure, topic.FeatureBroadcastCapacity}, testStats},
	// Capabilities: every declared mode can be created, and undeclared ones are refused at creation.
	{"Capabilities", nil, testCapabilities},
	// Durable: messages a balanced member received and did not settle before it closed are delivered again to its group; acked ones are not.
	{"DurableRedeliversUnsettled", []topic.Feature{topic.FeatureDurable}, testDurableRedelivers},
	// Headers a message is published with reach every recipient unchanged; a message published without any has none.
	{"HeadersReachEveryRecipient", nil, testHeaders},
	// Durable: Stats counts this process's groups and broadcast subscribers and the publishes, on a log too.
	{"DurableStats", []topic.Feature{topic.FeatureDurable}, testDurableStats},
	// Durable: a nacked message is delivered again to its group, with its Redeliveries counted.
	{"DurableNackRedelivers", []topic.Feature{topic.FeatureDurable}, testDurableNack},
	// Durable: an untracked message is settled with the backend; settling it twice, or an unknown id, is refused.
	{"DurableSettlesUntracked", []topic.Feature{topic.FeatureDurable}, testDurableSettles},
}

func testEmptyNames(s *suite) {
	t := s.t
	_, err := topic.NewName("")
	isErr(t, "NewName", err, topic.ErrEmptyName)
	_, err = topic.NewGroupName("")
	isErr(t, "NewGroupName", err, topic.ErrEmptyName)
	if n, err := topic.NewName("x"); err != nil || n != "x" {
		t.Fatalf("NewName(x) = %q, %v", n, err)
	}
	_, err = s.broker.CreateTopic("", topic.Options{}, s.backend)
	isErr(t, "CreateTopic", err, topic.ErrEmptyName)
	h := s.topic("t", balanced(4))
	_, err = h.Subscribe(t.Context(), topic.Balanced(""), topic.SubscriberOptions{})
	isErr(t, "Subscribe(Balanced(\"\"))", err, topic.ErrEmptyName)
	if len(s.broker.Names()) != 1 {
		t.Fatalf("Names = %v", s.broker.Names())
	}
}

func testBrokerLifecycle(s *suite) {
	t := s.t
	b := s.broker
	c := s.topic("c", balanced(4))
	a := s.topic("a", balanced(4))
	if got := b.Names(); !slices.Equal(got, []topic.Name{"a", "c"}) {
		t.Fatalf("Names = %v", got)
	}
	if h, ok := b.Topic("a"); !ok || h != a {
		t.Fatalf("Topic(a) = %v, %v", h, ok)
	}
	if _, ok := b.Topic("zz"); ok {
		t.Fatal("Topic(zz) found")
	}
	_, err := b.CreateTopic("a", topic.Options{}, s.backend)
	isErr(t, "duplicate CreateTopic", err, topic.ErrTopicExists)
	var te *topic.TopicError
	if !errors.As(err, &te) || te.Topic != "a" {
		t.Fatalf("error %v does not name the topic", err)
	}
	if !b.Remove("a") {
		t.Fatal("Remove(a) = false")
	}
	if b.Remove("a") {
		t.Fatal("second Remove(a) = true")
	}
	isErr(t, "publish after Remove", a.Publish(ctxT(t), 1), topic.ErrTopicClosed)
	if _, ok := b.Topic("a"); ok {
		t.Fatal("removed topic still registered")
	}
	// A removed name can be created again.
	s.topic("a", balanced(4))
	b.Close()
	isErr(t, "publish after broker Close", c.Publish(ctxT(t), 1), topic.ErrTopicClosed)
	if len(b.Names()) != 0 {
		t.Fatalf("Names after Close = %v", b.Names())
	}
}

func testCreateTopicsAtomic(s *suite) {
	t := s.t
	b := s.broker
	s.topic("existing", balanced(4))
	ok := topic.Options{Mode: topic.BalancedOnly}
	for _, batch := range [][]topic.Declaration[int]{
		// the last declaration collides with a registered topic
		{{Name: "n1", Options: ok, Backend: s.backend}, {Name: "n2", Options: ok, Backend: s.backend}, {Name: "existing", Options: ok, Backend: s.backend}},
		// a name repeated inside the batch
		{{Name: "n1", Options: ok, Backend: s.backend}, {Name: "n1", Options: ok, Backend: s.backend}},
		// one declaration has invalid options
		{{Name: "n1", Options: ok, Backend: s.backend}, {Name: "n2", Options: topic.Options{Balanced: topic.BalancedPolicy{Capacity: -1}}, Backend: s.backend}},
		// one declaration has an empty name
		{{Name: "n1", Options: ok, Backend: s.backend}, {Name: "", Options: ok, Backend: s.backend}},
	} {
		hs, err := b.CreateTopics(batch)
		if err == nil || hs != nil {
			t.Fatalf("CreateTopics(%v) = %v, %v; want an error", batch, hs, err)
		}
		if got := b.Names(); !slices.Equal(got, []topic.Name{"existing"}) {
			t.Fatalf("after failed batch (%v) Names = %v", err, got)
		}
	}
	_, err := b.CreateTopics([]topic.Declaration[int]{{Name: "x", Options: ok}, {Name: "existing", Options: ok}})
	isErr(t, "batch with existing", err, topic.ErrTopicExists)
	hs, err := b.CreateTopics([]topic.Declaration[int]{{Name: "n1", Options: ok, Backend: s.backend}, {Name: "n2", Options: ok, Backend: s.backend}})
	if err != nil || len(hs) != 2 || hs[0].Name() != "n1" || hs[1].Name() != "n2" {
		t.Fatalf("good batch = %v, %v", hs, err)
	}
	if got := b.Names(); !slices.Equal(got, []topic.Name{"existing", "n1", "n2"}) {
		t.Fatalf("Names = %v", got)
	}
}

func testTopicSetRemove(s *suite) {
	t := s.t
	h := s.topic("t", balanced(4))
	sub := s.sub(h, group("g"))
	set := topic.NewTopicSet[int]()
	if err := set.Bind("in", topic.Binding[int]{Handle: h, OnFull: topic.DropNewest}); err != nil {
		t.Fatal(err)
	}
	isErr(t, "Bind twice", set.Bind("in", topic.Binding[int]{Handle: h}), topic.ErrAliasExists)
	isErr(t, "Bind empty alias", set.Bind("", topic.Binding[int]{Handle: h}), topic.ErrEmptyName)
	bd, ok := set.Get("in")
	if !ok || bd.Handle != h || bd.OnFull != topic.DropNewest {
		t.Fatalf("Get = %+v, %v", bd, ok)
	}
	if out, err := bd.Publish(ctxT(t), 1); err != nil || out != topic.Published {
		t.Fatalf("Binding.Publish = %v, %v", out, err)
	}
	if !set.Remove("in") || set.Remove("in") {
		t.Fatal("Remove results wrong")
	}
	if _, ok := set.Get("in"); ok || len(set.Aliases()) != 0 {
		t.Fatal("alias still bound")
	}
	// The topic is still open: publishing and receiving still work.
	publish(t, h, 2)
	recvValue(t, sub, 1)
	recvValue(t, sub, 2)
	if _, ok := s.broker.Topic("t"); !ok {
		t.Fatal("topic unregistered by TopicSet.Remove")
	}
}

func testModeMismatch(s *suite) {
	t := s.t
	bo := s.topic("bal", balanced(4))
	_, err := bo.Subscribe(t.Context(), topic.Broadcast(), topic.SubscriberOptions{})
	isErr(t, "broadcast on balanced-only", err, topic.ErrSubscribeBroadcastNotSupported)
	s.sub(bo, group("g1"))
	s.sub(bo, group("g1"))
	_, err = bo.Subscribe(t.Context(), group("g2"), topic.SubscriberOptions{})
	isErr(t, "second group on balanced-only", err, topic.ErrSubscribeSingleGroupViolation)
	bc := s.topic("bc", broadcast(4, topic.DropOldest))
	_, err = bc.Subscribe(t.Context(), group("g"), topic.SubscriberOptions{})
	isErr(t, "balanced on broadcast-only", err, topic.ErrSubscribeBalancedNotSupported)
	mx := s.topic("mx", mixed(4, 4))
	s.sub(mx, group("g1"))
	s.sub(mx, group("g2"))
	s.sub(mx, topic.Broadcast())
}

func scale() int {
	var n int
	if _, err := fmt.Sscan(getenv("TOPICTEST_SCALE"), &n); err != nil || n < 1 {
		return 1
	}
	return n
}

func testExactlyOnce(s *suite) {
	t := s.t
	const publishers, members = 4, 4
	perPub := 2000 * scale()
	h := s.topic("t", balanced(16))
	subs := make([]*topic.Subscription[int], members)
	for i := range subs {
		subs[i] = s.sub(h, group("g"))
	}
	var mu sync.Mutex
	seen := make(map[int]int)
	perMember := make([]int, members)
	var rwg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, sub := range subs {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			buf := make([]topic.Item[int], 8)
			for {
				n, err := sub.ReceiveBatch(ctx, buf)
				if err != nil {
					return
				}
				mu.Lock()
				for _, it := range buf[:n] {
					seen[it.Value]++
				}
				perMember[i] += n
				mu.Unlock()
			}
		}()
	}
	var pwg sync.WaitGroup
	errs := make(chan error, publishers)
	for p := range publishers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := range perPub {
				if err := h.Publish(ctx, p*perPub+i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	pwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Publish: %v", err)
	}
	total := publishers * perPub
	wait.Within(t, patience, "every message received", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == total
	})
	h.Close()
	rwg.Wait()
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("message %d received %d times", v, n)
		}
	}
	sum := 0
	for _, n := range perMember {
		sum += n
	}
	if sum != total {
		t.Fatalf("members received %d deliveries, want %d", sum, total)
	}
}

func testOrder(s *suite) {
	t := s.t
	n := 500 * scale()
	// Broadcast: every subscriber sees every message in order.
	bc := s.topic("bc", broadcast(n, topic.DropOldest))
	subs := []*topic.Subscription[int]{s.sub(bc, topic.Broadcast()), s.sub(bc, topic.Broadcast()), s.sub(bc, topic.Broadcast())}
	// Balanced: a single member sees the stream in order.
	bal := s.topic("bal", balanced(16))
	bsub := s.sub(bal, group("g"))
	var wg sync.WaitGroup
	failures := make(chan string, 8)
	check := func(sub *topic.Subscription[int]) {
		defer wg.Done()
		for want := range n {
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			it, err := sub.Receive(ctx)
			cancel()
			if err != nil || it.Lagged != 0 || it.Value != want {
				failures <- fmt.Sprintf("got %+v, %v; want %d", it, err, want)
				return
			}
		}
	}
	for _, sub := range append(subs, bsub) {
		wg.Add(1)
		go check(sub)
	}
	for i := range n {
		publish(t, bc, i)
		publish(t, bal, i)
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Fatal(f)
	}
}

func testIndependentGroups(s *suite) {
	t := s.t
	const n = 200
	h := s.topic("t", mixed(n, n))
	a1, a2 := s.sub(h, group("a")), s.sub(h, group("a"))
	b := s.sub(h, group("b"))
	for i := range n {
		publish(t, h, i)
	}
	got := map[string][]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(patience)
	drain := func(name string, sub *topic.Subscription[int]) {
		defer wg.Done()
		for time.Now().Before(deadline) {
			mu.Lock()
			done := len(got[name]) >= n
			mu.Unlock()
			if done {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), quiet)
			it, err := sub.Receive(ctx)
			cancel()
			if err == nil {
				mu.Lock()
				got[name] = append(got[name], it.Value)
				mu.Unlock()
			}
		}
	}
	wg.Add(3)
	go drain("a", a1)
	go drain("a", a2)
	go drain("b", b)
	wg.Wait()
	for _, g := range []string{"a", "b"} {
		vs := got[g]
		if len(vs) != n {
			t.Fatalf("group %s received %d messages, want %d", g, len(vs), n)
		}
		slices.Sort(vs)
		for i := range n {
			if vs[i] != i {
				t.Fatalf("group %s received %v, want each of 0..%d once", g, vs, n-1)
			}
		}
	}
	recvNothing(t, a1)
	recvNothing(t, b)
}

func testBackpressure(s *suite) {
	t := s.t
	h := s.topic("t", balanced(2))
	sub := s.sub(h, group("g"))
	publish(t, h, 1, 2)
	// Full: a publish with a deadline waits and then gives up, publishing nothing.
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	err := h.Publish(ctx, 99)
	cancel()
	isErr(t, "Publish on full queue", err, context.DeadlineExceeded)
	// A blocked publish completes once a receive makes room.
	done := make(chan error, 1)
	go func() { done <- h.Publish(context.Background(), 3) }()
	select {
	case err := <-done:
		t.Fatalf("Publish on a full queue returned %v without waiting", err)
	case <-time.After(quiet):
	}
	recvValue(t, sub, 1)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(patience):
		t.Fatal("blocked Publish not released by a receive")
	}
	recvValue(t, sub, 2)
	recvValue(t, sub, 3)
	recvNothing(t, sub)
}

func testDropOnFull(s *suite) {
	t := s.t
	h := s.topic("t", balanced(1))
	sub := s.sub(h, group("g"))
	if out, err := h.TryPublish(1); err != nil || out != topic.Published {
		t.Fatalf("TryPublish = %v, %v", out, err)
	}
	if out, err := h.TryPublish(2); err != nil || out != topic.DroppedOnFull {
		t.Fatalf("TryPublish on full = %v, %v; want DroppedOnFull", out, err)
	}
	if out, err := h.PublishWith(ctxT(t), 3, topic.DropNewest); err != nil || out != topic.DroppedOnFull {
		t.Fatalf("PublishWith(DropNewest) on full = %v, %v", out, err)
	}
	bd := topic.Binding[int]{Handle: h, OnFull: topic.DropNewest}
	if out, err := bd.Publish(ctxT(t), 4); err != nil || out != topic.DroppedOnFull {
		t.Fatalf("Binding(DropNewest).Publish on full = %v, %v", out, err)
	}
	recvValue(t, sub, 1)
	recvNothing(t, sub)
	if st := h.Stats(); st.Dropped != 3 || st.Published != 1 {
		t.Fatalf("Stats = %+v, want 1 published, 3 dropped", st)
	}
	// A topic configured with on_full drop_newest: Binding carries it.
	d := s.topic("d", topic.Options{Mode: topic.BalancedOnly, Balanced: topic.BalancedPolicy{Capacity: 1, OnFull: topic.DropNewest}})
	s.sub(d, group("g"))
	bd = topic.Binding[int]{Handle: d, OnFull: d.Options().Balanced.OnFull}
	if out, _ := bd.Publish(ctxT(t), 1); out != topic.Published {
		t.Fatalf("first publish %v", out)
	}
	if out, _ := bd.Publish(ctxT(t), 2); out != topic.DroppedOnFull {
		t.Fatalf("publish on full drop_newest topic %v", out)
	}
	// Handle.Publish applies the topic's on_full too.
	isErr(t, "Publish on full drop_newest topic", d.Publish(ctxT(t), 3), topic.ErrDroppedOnFull)
	if st := d.Stats(); st.Dropped != 2 || st.Published != 1 {
		t.Fatalf("Stats = %+v, want 1 published, 2 dropped", st)
	}
	// PublishWith(Block) overrides it and waits.
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	defer cancel()
	if _, err := d.PublishWith(ctx, 4, topic.Block); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PublishWith(Block) on full = %v, want it to wait", err)
	}
}

func testTryPublishWithRoom(s *suite) {
	t := s.t
	h := s.topic("t", mixed(8, 8))
	g, bc := s.sub(h, group("g")), s.sub(h, topic.Broadcast())
	if out, err := h.TryPublish(1); err != nil || out != topic.Published {
		t.Fatalf("TryPublish with room = %v, %v; want Published", out, err)
	}
	if out, err := h.PublishWith(ctxT(t), 2, topic.DropNewest); err != nil || out != topic.Published {
		t.Fatalf("PublishWith(DropNewest) with room = %v, %v; want Published", out, err)
	}
	bd := topic.Binding[int]{Handle: h, OnFull: topic.DropNewest}
	if out, err := bd.Publish(ctxT(t), 3); err != nil || out != topic.Published {
		t.Fatalf("Binding(DropNewest).Publish with room = %v, %v; want Published", out, err)
	}
	for _, sub := range []*topic.Subscription[int]{g, bc} {
		for v := 1; v <= 3; v++ {
			recvValue(t, sub, v)
		}
		recvNothing(t, sub)
	}
	if st := h.Stats(); st.Published != 3 || st.Dropped != 0 {
		t.Fatalf("Stats = %+v, want 3 published, none dropped", st)
	}
	// A topic configured with on_full drop_newest (last: a backend that
	// does not declare it skips from here).
	d := s.topic("d", topic.Options{Mode: topic.BalancedOnly, Balanced: topic.BalancedPolicy{Capacity: 8, OnFull: topic.DropNewest}})
	dg := s.sub(d, group("g"))
	publish(t, d, 4)
	recvValue(t, dg, 4)
}

func testLagDropOldest(s *suite) {
	t := s.t
	const capacity, n = 4, 10
	h := s.topic("t", broadcast(capacity, topic.DropOldest))
	slow := s.sub(h, topic.Broadcast())
	fast := s.sub(h, topic.Broadcast())
	for i := range n {
		// The publisher never waits, whatever the slow subscriber does.
		if out, err := h.TryPublish(i); err != nil || out != topic.Published {
			t.Fatalf("TryPublish(%d) = %v, %v", i, out, err)
		}
		recvValue(t, fast, i)
	}
	it := recv(t, slow)
	if it.Lagged != n-capacity {
		t.Fatalf("slow subscriber got %+v, want Lagged=%d", it, n-capacity)
	}
	for i := n - capacity; i < n; i++ {
		recvValue(t, slow, i)
	}
	publish(t, h, n)
	recvValue(t, slow, n)
	recvValue(t, fast, n)
	if st := h.Stats(); st.Lagged != n-capacity || st.BroadcastSubscribers != 2 {
		t.Fatalf("Stats = %+v", st)
	}
}

func testLagDisconnect(s *suite) {
	t := s.t
	const capacity, n = 4, 10
	h := s.topic("t", broadcast(capacity, topic.Disconnect))
	slow := s.sub(h, topic.Broadcast())
	fast := s.sub(h, topic.Broadcast())
	for i := range n {
		if out, err := h.TryPublish(i); err != nil || out != topic.Published {
			t.Fatalf("TryPublish(%d) = %v, %v", i, out, err)
		}
		recvValue(t, fast, i)
	}
	it := recv(t, slow)
	if it.Lagged == 0 {
		t.Fatalf("slow subscriber got %+v, want a final lag notice", it)
	}
	recvClosed(t, slow)
	recvClosed(t, slow)
	publish(t, h, n)
	recvValue(t, fast, n)
	if st := h.Stats(); st.BroadcastSubscribers != 1 || st.Lagged == 0 {
		t.Fatalf("Stats = %+v, want 1 subscriber left and lag counted", st)
	}
}

func testLagAccounting(s *suite) {
	t := s.t
	n := 20000 * scale()
	h := s.topic("t", broadcast(16, topic.DropOldest))
	const subs = 4
	type result struct {
		values, lagged int
		err            string
	}
	results := make(chan result, subs)
	var wg sync.WaitGroup
	for i := range subs {
		sub := s.sub(h, topic.Broadcast())
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]topic.Item[int], 1+i*5) // different batch sizes
			next, r := 0, result{}
			for {
				k, err := sub.ReceiveBatch(context.Background(), buf)
				if err != nil {
					break
				}
				for _, it := range buf[:k] {
					if it.Lagged > 0 {
						next += int(it.Lagged)
						r.lagged += int(it.Lagged)
						continue
					}
					if it.Value != next && r.err == "" {
						r.err = fmt.Sprintf("got %d, want %d", it.Value, next)
					}
					next++
					r.values++
				}
			}
			if next != n && r.err == "" {
				r.err = fmt.Sprintf("accounted for %d of %d messages", next, n)
			}
			results <- r
		}()
	}
	for i := range n {
		if out, err := h.TryPublish(i); err != nil || out != topic.Published {
			t.Fatalf("TryPublish = %v, %v", out, err)
		}
	}
	h.Close()
	wg.Wait()
	close(results)
	totalLag := 0
	for r := range results {
		if r.err != "" {
			t.Fatal(r.err)
		}
		totalLag += r.lagged
	}
	if st := h.Stats(); st.Lagged != uint64(totalLag) {
		t.Fatalf("Stats.Lagged = %d, subscribers saw %d", st.Lagged, totalLag)
	}
}

func testMixedAllOrNothing(s *suite) {
	t := s.t
	h := s.topic("t", mixed(1, 16))
	full := s.sub(h, group("full"))
	roomy := s.sub(h, group("roomy"))
	bc := s.sub(h, topic.Broadcast())
	if out, err := h.TryPublish(1); err != nil || out != topic.Published {
		t.Fatalf("TryPublish = %v, %v", out, err)
	}
	recvValue(t, roomy, 1) // group "roomy" has room again, "full" does not
	if out, err := h.TryPublish(2); err != nil || out != topic.DroppedOnFull {
		t.Fatalf("TryPublish with one full group = %v, %v; want DroppedOnFull", out, err)
	}
	if out, err := h.PublishWith(ctxT(t), 3, topic.DropNewest); err != nil || out != topic.DroppedOnFull {
		t.Fatalf("PublishWith(DropNewest) = %v, %v", out, err)
	}
	recvValue(t, full, 1)
	publish(t, h, 4)
	// Neither the broadcast subscriber nor the group with room saw 2 or 3.
	recvValue(t, bc, 1)
	recvValue(t, bc, 4)
	recvValue(t, roomy, 4)
	recvValue(t, full, 4)
	recvNothing(t, bc)
	recvNothing(t, roomy)
}

func testMixedBlocked(s *suite) {
	t := s.t
	h := s.topic("t", mixed(1, 16))
	full := s.sub(h, group("full"))
	roomy := s.sub(h, group("roomy"))
	bc := s.sub(h, topic.Broadcast())
	publish(t, h, 1)
	recvValue(t, roomy, 1)
	recvValue(t, bc, 1)
	done := make(chan error, 1)
	go func() { done <- h.Publish(context.Background(), 2) }()
	// While 2 waits for "full", it is nowhere: not in "roomy", not broadcast.
	recvNothing(t, roomy)
	recvNothing(t, bc)
	// "roomy" keeps its room while the publish waits: other traffic into it
	// is not held up by a reservation (a try-publish still finds only "full"
	// full, and after "full" drains the waiting publish goes through).
	select {
	case err := <-done:
		t.Fatalf("Publish returned %v while a group was full", err)
	default:
	}
	recvValue(t, full, 1)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(patience):
		t.Fatal("blocked publish never completed")
	}
	recvValue(t, full, 2)
	recvValue(t, roomy, 2)
	recvValue(t, bc, 2)
}

func testMixedConcurrent(s *suite) {
	t := s.t
	const publishers = 4
	perPub := 1000 * scale()
	total := publishers * perPub
	h := s.topic("t", mixed(2, total))
	type member struct {
		group string
		sub   *topic.Subscription[int]
	}
	var members []member
	for _, g := range []string{"a", "b"} {
		for range 2 {
			members = append(members, member{g, s.sub(h, group(g))})
		}
	}
	bc := s.sub(h, topic.Broadcast())
	var mu sync.Mutex
	seen := map[string]map[int]int{"a": {}, "b": {}, "bc": {}}
	var wg sync.WaitGroup
	drain := func(name string, sub *topic.Subscription[int]) {
		defer wg.Done()
		buf := make([]topic.Item[int], 3)
		for {
			n, err := sub.ReceiveBatch(context.Background(), buf)
			if err != nil {
				return
			}
			mu.Lock()
			for _, it := range buf[:n] {
				seen[name][it.Value]++
			}
			mu.Unlock()
		}
	}
	for _, m := range members {
		wg.Add(1)
		go drain(m.group, m.sub)
	}
	wg.Add(1)
	go drain("bc", bc)
	var pwg sync.WaitGroup
	errs := make(chan error, publishers)
	for p := range publishers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := range perPub {
				if err := h.Publish(ctxT(t), p*perPub+i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	pwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Publish: %v", err)
	}
	wait.Within(t, patience, "every subscriber drained", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen["a"]) == total && len(seen["b"]) == total && len(seen["bc"]) == total
	})
	h.Close()
	wg.Wait()
	for name, m := range seen {
		for v, n := range m {
			if n != 1 {
				t.Fatalf("%s received %d %d times", name, v, n)
			}
		}
	}
}

func testCancelledPublish(s *suite) {
	t := s.t
	h := s.topic("t", mixed(1, 16))
	full := s.sub(h, group("full"))
	roomy := s.sub(h, group("roomy"))
	bc := s.sub(h, topic.Broadcast())
	publish(t, h, 1)
	recvValue(t, roomy, 1)
	recvValue(t, bc, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Publish(ctx, 2) }()
	recvNothing(t, roomy)
	cancel()
	select {
	case err := <-done:
		isErr(t, "cancelled Publish", err, context.Canceled)
	case <-time.After(patience):
		t.Fatal("cancelled publish did not return")
	}
	recvValue(t, full, 1)
	publish(t, h, 3)
	for _, sub := range []*topic.Subscription[int]{full, roomy, bc} {
		recvValue(t, sub, 3)
		recvNothing(t, sub)
	}
	// A context already cancelled publishes nothing, even with room.
	isErr(t, "Publish with cancelled ctx", h.Publish(ctx, 4), context.Canceled)
	recvNothing(t, bc)
	if st := h.Stats(); st.Published != 2 {
		t.Fatalf("Published = %d, want 2", st.Published)
	}
}

func testCancelledContext(s *suite) {
	t := s.t
	h := s.topic("t", mixed(8, 8))
	g := s.sub(h, group("g"))
	bc := s.sub(h, topic.Broadcast())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	isErr(t, "Publish with cancelled ctx", h.Publish(ctx, 1), context.Canceled)
	publish(t, h, 2)
	recvValue(t, g, 2)
	recvValue(t, bc, 2)
	recvNothing(t, g)
	recvNothing(t, bc)
	if st := h.Stats(); st.Published != 1 {
		t.Fatalf("Published = %d, want 1", st.Published)
	}
}

func testSubscribeEndedContext(s *suite) {
	t := s.t
	h := s.topic("t", mixed(8, 8))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// The context is looked at first: before the group's name too.
	for name, mode := range map[string]topic.SubscriptionMode{`Balanced("g")`: group("g"), "Broadcast()": topic.Broadcast(), `Balanced("")`: topic.Balanced("")} {
		sub, err := h.Subscribe(ctx, mode, topic.SubscriberOptions{})
		if sub != nil {
			sub.Close()
		}
		var te *topic.TopicError
		if !errors.Is(err, context.Canceled) || !errors.As(err, &te) || te.Topic != "t" {
			t.Fatalf("Subscribe(%s) with an ended context: %v, want a *topic.TopicError naming the topic and wrapping context.Canceled", name, err)
		}
	}
	if st := h.Stats(); st.BalancedGroups != 0 || st.BroadcastSubscribers != 0 {
		t.Fatalf("Stats after subscribes with an ended context: %d groups, %d broadcast subscribers; want none", st.BalancedGroups, st.BroadcastSubscribers)
	}

	// The backend's own Subscribe, which a Handle calls only with a live
	// context, honours an ended one too (another caller of State, or a
	// context that ends on the way in).
	st, err := s.backend.NewTopic(ctxT(t), "t-state", mixed(8, 8).WithDefaults())
	if err != nil {
		t.Fatalf("NewTopic(t-state): %v", err)
	}
	defer st.Close()
	for name, mode := range map[string]topic.SubscriptionMode{`Balanced("g")`: group("g"), "Broadcast()": topic.Broadcast()} {
		sub, err := st.Subscribe(ctx, mode, topic.SubscriberOptions{})
		if sub != nil {
			sub.Close()
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the backend's Subscribe(%s) with an ended context: %v, want an error wrapping context.Canceled", name, err)
		}
	}
	if stats := st.Stats(); stats.BalancedGroups != 0 || stats.BroadcastSubscribers != 0 {
		t.Fatalf("the backend's Stats after subscribes with an ended context: %d groups, %d broadcast subscribers; want none", stats.BalancedGroups, stats.BroadcastSubscribers)
	}

	// Nor did they leave a subscription behind that the backend does not
	// count: what is published now is kept for nobody, and the group's
	// first member receives what is published from then on.
	stPublish(t, st, 1)
	m, err := st.Subscribe(ctxT(t), group("g"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatalf("the backend's Subscribe(Balanced(\"g\")): %v", err)
	}
	defer m.Close()
	stPublish(t, st, 2)
	buf := make([]topic.Envelope[int], 4)
	if n, err := m.Receive(ctxT(t), buf); err != nil || n != 1 || buf[0].Value != 2 {
		t.Fatalf("the group's first member received %v, %v; want only the message published after it subscribed (2)", buf[:n], err)
	}
	quietCtx, stop := context.WithTimeout(context.Background(), quiet)
	defer stop()
	if n, err := m.Receive(quietCtx, buf); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the group's first member then received %v, %v; want nothing", buf[:n], err)
	}

	// A tracked publish now reaches no subscriber (on a backend that
	// carries outcomes back to publishers; the others skip from here).
	p := s.tracked(h, topic.TrackedOptions{})
	r, err := p.Publish(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	expectResult(t, r, topic.Nacked, topic.ErrNoSubscribers)
	// Nor was it kept for the group the refused subscribe named: the
	// group's first member receives what is published from then on.
	g := s.sub(h, group("g"))
	publish(t, h, 2)
	recvValue(t, g, 2)
	recvNothing(t, g)
}

// stPublish publishes v through a backend's State, untracked.
func stPublish(t *testing.T, st topic.State[int], v int) {
	t.Helper()
	if out, err := st.Publish(ctxT(t), topic.Envelope[int]{ID: topic.MessageID(v), Value: v}, topic.Block); err != nil || out != topic.Published {
		t.Fatalf("the backend's Publish(%d) = %v, %v", v, out, err)
	}
}

func testNoReplay(s *suite) {
	t := s.t
	for _, o := range []topic.Options{balanced(8), broadcast(8, topic.DropOldest), mixed(8, 8)} {
		h := s.topic(o.Mode.String(), o)
		publish(t, h, 1, 2, 3)
		var sub *topic.Subscription[int]
		if o.Mode == topic.BroadcastOnly {
			sub = s.sub(h, topic.Broadcast())
		} else {
			sub = s.sub(h, group("g"))
		}
		publish(t, h, 4)
		recvValue(t, sub, 4)
		recvNothing(t, sub)
		if o.Mode == topic.Mixed {
			late := s.sub(h, topic.Broadcast())
			publish(t, h, 5)
			recvValue(t, late, 5)
		}
	}
}

func testSubscriptionClose(s *suite) {
	t := s.t
	h := s.topic("t", mixed(2, 8))
	for _, c := range []struct {
		name string
		mode topic.SubscriptionMode
	}{{"balanced", group("g")}, {"broadcast", topic.Broadcast()}} {
		sub := s.sub(h, c.mode)
		recvDone := make(chan error, 1)
		go func() {
			_, err := sub.Receive(context.Background())
			recvDone <- err
		}()
		const closers = 2
		closed := make(chan struct{}, closers)
		for range closers {
			go func() {
				sub.Close()
				closed <- struct{}{}
			}()
		}
		select {
		case err := <-recvDone:
			isErr(t, fmt.Sprintf("a Receive waiting on a %s subscription as it closed", c.name), err, topic.ErrSubscriptionClosed)
		case <-time.After(patience):
			t.Fatalf("a Receive waiting on a %s subscription not woken by its Close", c.name)
		}
		for range closers {
			select {
			case <-closed:
			case <-time.After(patience):
				t.Fatalf("a Close of a %s subscription, called with another, did not return", c.name)
			}
		}
		recvClosed(t, sub)
	}
	stats := h.Stats()
	if stats.BalancedGroups != 0 || stats.BroadcastSubscribers != 0 {
		t.Fatalf("Stats once both subscriptions closed = %+v, want no group nor broadcast subscriber", stats)
	}
	publish(t, h, 1)
}

func testClose(s *suite) {
	t := s.t
	caps := s.backend.Capabilities()
	h := s.topic("t", mixed(2, 8))
	g := s.sub(h, group("g"))
	bc := s.sub(h, topic.Broadcast())
	waiter := s.sub(h, topic.Broadcast())
	publish(t, h, 1, 2)
	recvValue(t, waiter, 1)
	recvValue(t, waiter, 2)
	// A receiver waiting for the next message, and (where slow groups push
	// back) a publisher blocked on the full group, are both woken by Close.
	waiting := map[string]chan error{}
	if caps.Has(topic.FeatureGroupBackpressure) {
		pubDone := make(chan error, 1)
		go func() { pubDone <- h.Publish(context.Background(), 3) }()
		waiting["publish"] = pubDone
	}
	recvDone := make(chan error, 1)
	go func() {
		_, err := waiter.Receive(context.Background())
		recvDone <- err
	}()
	waiting["receive"] = recvDone
	recvValue(t, bc, 1)
	recvValue(t, bc, 2)
	h.Close()
	h.Close() // idempotent
	for name, ch := range waiting {
		select {
		case err := <-ch:
			want := topic.ErrTopicClosed
			if name == "receive" {
				want = topic.ErrSubscriptionClosed
			}
			isErr(t, "blocked "+name+" after Close", err, want)
		case <-time.After(patience):
			t.Fatalf("blocked %s not woken by Close", name)
		}
	}
	isErr(t, "Publish after Close", h.Publish(ctxT(t), 4), topic.ErrTopicClosed)
	_, err := h.TryPublish(4)
	isErr(t, "TryPublish after Close", err, topic.ErrTopicClosed)
	if caps.Has(topic.FeatureDurable) {
		// What the member had fetched may still come out, in order; the rest
		// stays on the broker for the group. Then it reports closed.
		drainThenClosed(t, g, 1, 2)
	} else {
		// The group drains what it holds, then reports closed.
		recvValue(t, g, 1)
		recvValue(t, g, 2)
		recvClosed(t, g)
	}
	recvClosed(t, bc)
	_, err = h.Subscribe(t.Context(), group("g"), topic.SubscriberOptions{})
	isErr(t, "balanced Subscribe after Close", err, topic.ErrTopicClosed)
	_, err = h.Subscribe(t.Context(), group("other"), topic.SubscriberOptions{})
	isErr(t, "new group after Close", err, topic.ErrTopicClosed)
	_, err = h.Subscribe(t.Context(), topic.Broadcast(), topic.SubscriberOptions{})
	isErr(t, "broadcast Subscribe after Close", err, topic.ErrTopicClosed)
	_, err = h.Tracked(topic.TrackedOptions{})
	isErr(t, "Tracked after Close", err, topic.ErrTopicClosed)
	// Closing a subscription ends its own stream even when the topic is open.
	o := s.topic("open", balanced(4))
	a, b := s.sub(o, group("g")), s.sub(o, group("g"))
	a.Close()
	recvClosed(t, a)
	publish(t, o, 7)
	recvValue(t, b, 7)
}

func testTrackedAck(s *suite) {
	t := s.t
	h := s.topic("t", balanced(8))
	sub := s.sub(h, group("g"))
	p := s.tracked(h, topic.TrackedOptions{})
	r, err := p.Publish(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	pending(t, r)
	if st := h.Stats(); st.InFlight != 1 {
		t.Fatalf("InFlight = %d, want 1", st.InFlight)
	}
	it := recvValue(t, sub, 1)
	pending(t, r)
	if err := sub.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	expectResult(t, r, topic.Acked, nil)
	if st := h.Stats(); st.InFlight != 0 {
		t.Fatalf("InFlight after ack = %d", st.InFlight)
	}
	select {
	case <-r.Done():
	default:
		t.Fatal("Done not closed")
	}
}

func testTrackedNack(s *suite) {
	t := s.t
	h := s.topic("t", balanced(8))
	sub := s.sub(h, group("g"))
	p := s.tracked(h, topic.TrackedOptions{})
	r, err := p.Publish(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	it := recvValue(t, sub, 1)
	reason := errors.New("bad record")
	if err := sub.Nack(it.ID, reason); err != nil {
		t.Fatal(err)
	}
	expectResult(t, r, topic.Nacked, reason)
	if s.backend.Capabilities().Has(topic.FeatureDurable) {
		// The nacked message comes again, its publish already resolved;
		// acking it settles it with the backend.
		again := recvValue(t, sub, 1)
		if err := sub.Ack(again.ID); err != nil {
			t.Fatalf("Ack of the redelivery: %v", err)
		}
	}
	// A nack without a reason carries ErrNacked.
	r, _ = p.Publish(ctxT(t), 2)
	it = recvValue(t, sub, 2)
	if err := sub.Nack(it.ID, nil); err != nil {
		t.Fatal(err)
	}
	expectResult(t, r, topic.Nacked, topic.ErrNacked)
}

func testTrackedTimeout(s *suite) {
	t := s.t
	h := s.topic("t", balanced(8))
	sub := s.sub(h, group("g"))
	p := s.tracked(h, topic.TrackedOptions{Timeout: 20 * time.Millisecond})
	r1, _ := p.Publish(ctxT(t), 1)
	r2, _ := p.Publish(ctxT(t), 2)
	expectResult(t, r1, topic.TimedOut, nil)
	expectResult(t, r2, topic.TimedOut, nil)
	it := recvValue(t, sub, 1)
	if s.backend.Capabilities().Has(topic.FeatureDurable) {
		// The publish is resolved, but the delivery is the backend's to
		// settle still.
		if err := sub.Ack(it.ID); err != nil {
			t.Fatalf("Ack after timeout on a durable backend: %v, want nil (the backend settles it)", err)
		}
	} else {
		isErr(t, "Ack after timeout", sub.Ack(it.ID), topic.ErrMessageNotTracked)
	}
	if st := h.Stats(); st.InFlight != 0 {
		t.Fatalf("InFlight = %d", st.InFlight)
	}
	// The publisher keeps working after timeouts.
	r3, _ := p.Publish(ctxT(t), 3)
	recvValue(t, sub, 2)
	it = recvValue(t, sub, 3)
	if err := sub.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	res := waitReceipt(t, r3)
	if res.Outcome != topic.Acked && res.Outcome != topic.TimedOut {
		t.Fatalf("outcome %v", res.Outcome)
	}
}

func testTrackedTopicClosed(s *suite) {
	t := s.t
	h := s.topic("t", broadcast(8, topic.DropOldest))
	sub := s.sub(h, topic.Broadcast())
	p := s.tracked(h, topic.TrackedOptions{})
	r, _ := p.Publish(ctxT(t), 1)
	it := recvValue(t, sub, 1)
	h.Close()
	expectResult(t, r, topic.TopicClosed, topic.ErrTopicClosed)
	isErr(t, "Ack after close", sub.Ack(it.ID), topic.ErrMessageNotTracked)
	_, err := p.Publish(ctxT(t), 2)
	isErr(t, "tracked Publish after topic Close", err, topic.ErrTopicClosed)
	_, _, err = p.TryPublish(2)
	isErr(t, "tracked TryPublish after topic Close", err, topic.ErrTopicClosed)
	if st := h.Stats(); st.InFlight != 0 {
		t.Fatalf("InFlight = %d", st.InFlight)
	}
}

func testTrackedMaxInFlight(s *suite) {
	t := s.t
	h := s.topic("t", balanced(8))
	sub := s.sub(h, group("g"))
	p := s.tracked(h, topic.TrackedOptions{MaxInFlight: 2})
	r1, _ := p.Publish(ctxT(t), 1)
	r2, out, err := p.TryPublish(2)
	if err != nil || out != topic.Published || r2 == nil {
		t.Fatalf("TryPublish = %v, %v", out, err)
	}
	r3, out, err := p.TryPublish(3)
	if err != nil || out != topic.MaxInFlightReached || r3 != nil {
		t.Fatalf("TryPublish at the bound = %v, %v, %v; want MaxInFlightReached", r3, out, err)
	}
	if out, err := p.TryPublishFunc(3, func(topic.Result) {}); err != nil || out != topic.MaxInFlightReached {
		t.Fatalf("TryPublishFunc at the bound = %v, %v", out, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	_, err = p.Publish(ctx, 3)
	cancel()
	isErr(t, "Publish at the bound", err, context.DeadlineExceeded)
	// A blocked Publish proceeds when an outcome frees a slot.
	done := make(chan error, 1)
	go func() {
		_, err := p.Publish(context.Background(), 4)
		done <- err
	}()
	it := recvValue(t, sub, 1)
	if err := sub.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	expectResult(t, r1, topic.Acked, nil)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(patience):
		t.Fatal("blocked tracked Publish never got a slot")
	}
	recvValue(t, sub, 2)
	recvValue(t, sub, 4) // 3 was never published
	if p.InFlight() != 2 || h.Stats().InFlight != 2 {
		t.Fatalf("InFlight = %d / %d, want 2", p.InFlight(), h.Stats().InFlight)
	}
}

func testAckNotTracked(s *suite) {
	t := s.t
	h := s.topic("t", balanced(8))
	sub := s.sub(h, group("g"))
	publish(t, h, 1)
	it := recvValue(t, sub, 1)
	if !s.backend.Capabilities().Has(topic.FeatureDurable) {
		// A durable backend settles untracked messages too (DurableSettlesUntracked).
		isErr(t, "Ack untracked", sub.Ack(it.ID), topic.ErrMessageNotTracked)
		isErr(t, "Nack untracked", sub.Nack(it.ID, nil), topic.ErrMessageNotTracked)
	}
	isErr(t, "Ack unknown", sub.Ack(123456), topic.ErrMessageNotTracked)
	p := s.tracked(h, topic.TrackedOptions{})
	r, _ := p.Publish(ctxT(t), 2)
	it = recvValue(t, sub, 2)
	if err := sub.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	expectResult(t, r, topic.Acked, nil)
	isErr(t, "second Ack", sub.Ack(it.ID), topic.ErrMessageNotTracked)
	isErr(t, "Nack after Ack", sub.Nack(it.ID, nil), topic.ErrMessageNotTracked)
}

func testDroppedDelivery(s *suite) {
	t := s.t
	// Received, then the subscription closes without acking.
	h := s.topic("t", balanced(8))
	sub := s.sub(h, group("g"))
	p := s.tracked(h, topic.TrackedOptions{})
	r, _ := p.Publish(ctxT(t), 1)
	recvValue(t, sub, 1)
	sub.Close()
	expectResult(t, r, topic.Nacked, topic.ErrDeliveryDropped)
	// Queued in a group whose last member leaves before receiving it.
	sub2 := s.sub(h, group("g"))
	r, _ = p.Publish(ctxT(t), 2)
	sub2.Close()
	expectResult(t, r, topic.Nacked, topic.ErrDeliveryDropped)
	// Another member of the group still gets it when one leaves.
	m1, m2 := s.sub(h, group("g")), s.sub(h, group("g"))
	r, _ = p.Publish(ctxT(t), 3)
	m1.Close()
	pending(t, r)
	it := recvValue(t, m2, 3)
	if err := m2.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	expectResult(t, r, topic.Acked, nil)
	// Broadcast: delivered, never received, subscriber closes.
	b := s.topic("b", broadcast(8, topic.DropOldest))
	bs := s.sub(b, topic.Broadcast())
	bp := s.tracked(b, topic.TrackedOptions{})
	r, _ = bp.Publish(ctxT(t), 1)
	bs.Close()
	expectResult(t, r, topic.Nacked, topic.ErrDeliveryDropped)
	// Broadcast drop_oldest: overwritten before the subscriber read it.
	l := s.topic("l", broadcast(2, topic.DropOldest))
	ls := s.sub(l, topic.Broadcast())
	lp := s.tracked(l, topic.TrackedOptions{})
	r, _ = lp.Publish(ctxT(t), 1)
	publish(t, l, 2, 3)
	expectResult(t, r, topic.Nacked, topic.ErrLagged)
	if it := recv(t, ls); it.Lagged != 1 {
		t.Fatalf("got %+v, want Lagged=1", it)
	}
}

func testNoSubscriber(s *suite) {
	t := s.t
	for _, o := range []topic.Options{balanced(8), broadcast(8, topic.DropOldest), mixed(8, 8)} {
		h := s.topic(o.Mode.String(), o)
		p := s.tracked(h, topic.TrackedOptions{})
		r, err := p.Publish(ctxT(t), 1)
		if err != nil {
			t.Fatal(err)
		}
		expectResult(t, r, topic.Nacked, topic.ErrNoSubscribers)
	}
}

func testTrackedFuncAndClose(s *suite) {
	t := s.t
	h := s.topic("t", balanced(1))
	sub := s.sub(h, group("g"))
	p := s.tracked(h, topic.TrackedOptions{})
	got := make(chan topic.Result, 4)
	if err := p.PublishFunc(ctxT(t), 1, func(r topic.Result) { got <- r }); err != nil {
		t.Fatal(err)
	}
	it := recvValue(t, sub, 1)
	if err := sub.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.Outcome != topic.Acked {
			t.Fatalf("callback got %v", r.Outcome)
		}
	case <-time.After(patience):
		t.Fatal("callback never called")
	}
	dp := s.tracked(h, topic.TrackedOptions{OnFull: topic.DropNewest})
	if _, err := dp.Publish(ctxT(t), 2); err != nil {
		t.Fatal(err)
	}
	if s.backend.Capabilities().Has(topic.FeatureGroupBackpressure) {
		// The group's queue (capacity 1) is full: a DropNewest tracked
		// publisher reports it as ErrDroppedOnFull.
		_, err := dp.Publish(ctxT(t), 3)
		isErr(t, "DropNewest Publish on full", err, topic.ErrDroppedOnFull)
		if out, err := dp.TryPublishFunc(3, func(topic.Result) { t.Error("callback for a dropped publish") }); err != nil || out != topic.DroppedOnFull {
			t.Fatalf("TryPublishFunc on full = %v, %v", out, err)
		}
		if dp.InFlight() != 1 {
			t.Fatalf("InFlight = %d, want 1 (dropped publishes are not in flight)", dp.InFlight())
		}
		if r, _, _ := p.TryPublish(4); r != nil {
			t.Fatal("receipt for a dropped try-publish")
		}
	}
	// Closing a tracked publisher resolves what it has pending.
	recvValue(t, sub, 2)
	r, _ := p.Publish(ctxT(t), 5)
	dp.Close()
	p.Close()
	p.Close()
	expectResult(t, r, topic.TopicClosed, topic.ErrPublisherClosed)
	_, err := p.Publish(ctxT(t), 6)
	isErr(t, "Publish on closed publisher", err, topic.ErrPublisherClosed)
	_, _, err = p.TryPublish(6)
	isErr(t, "TryPublish on closed publisher", err, topic.ErrPublisherClosed)
	if h.Stats().InFlight != 0 {
		t.Fatalf("InFlight = %d", h.Stats().InFlight)
	}
}

func testAckFirst(s *suite) {
	t := s.t
	h := s.topic("t", broadcast(8, topic.DropOldest))
	a, b := s.sub(h, topic.Broadcast()), s.sub(h, topic.Broadcast())
	p := s.tracked(h, topic.TrackedOptions{})
	r, _ := p.Publish(ctxT(t), 1)
	ia, ib := recvValue(t, a, 1), recvValue(t, b, 1)
	if err := a.Ack(ia.ID); err != nil {
		t.Fatal(err)
	}
	expectResult(t, r, topic.Acked, nil)
	isErr(t, "second subscriber's Nack after the first ack", b.Nack(ib.ID, errors.New("late")), topic.ErrMessageNotTracked)
	// A nack first wins too.
	r, _ = p.Publish(ctxT(t), 2)
	ia, ib = recvValue(t, a, 2), recvValue(t, b, 2)
	reason := errors.New("first says no")
	if err := b.Nack(ib.ID, reason); err != nil {
		t.Fatal(err)
	}
	expectResult(t, r, topic.Nacked, reason)
	isErr(t, "Ack after the first nack", a.Ack(ia.ID), topic.ErrMessageNotTracked)
	// Mixed: a group member's ack resolves it.
	m := s.topic("m", mixed(8, 8))
	g := s.sub(m, group("g"))
	bc := s.sub(m, topic.Broadcast())
	mp := s.tracked(m, topic.TrackedOptions{})
	r, _ = mp.Publish(ctxT(t), 1)
	recvValue(t, bc, 1)
	it := recvValue(t, g, 1)
	if err := g.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	expectResult(t, r, topic.Acked, nil)
}

func testAckAllEvery(s *suite) {
	t := s.t
	h := s.topic("t", ackAll(8))
	subs := []*topic.Subscription[int]{s.sub(h, topic.Broadcast()), s.sub(h, topic.Broadcast()), s.sub(h, topic.Broadcast())}
	p := s.tracked(h, topic.TrackedOptions{})
	r, err := p.Publish(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	// A subscriber that joins after the publish is not required.
	late := s.sub(h, topic.Broadcast())
	for i, sub := range subs {
		it := recvValue(t, sub, 1)
		pending(t, r)
		if err := sub.Ack(it.ID); err != nil {
			t.Fatal(err)
		}
		if i < len(subs)-1 {
			pending(t, r)
		}
	}
	expectResult(t, r, topic.Acked, nil)
	recvNothing(t, late)
	// Concurrent acks from every subscriber resolve it exactly once.
	for round := range 50 {
		r, err := p.Publish(ctxT(t), 100+round)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, sub := range append(subs, late) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), patience)
				defer cancel()
				it, err := sub.Receive(ctx)
				if err == nil {
					_ = sub.Ack(it.ID)
				}
			}()
		}
		wg.Wait()
		expectResult(t, r, topic.Acked, nil)
	}
}

func testAckAllNack(s *suite) {
	t := s.t
	h := s.topic("t", ackAll(8))
	a, b, c := s.sub(h, topic.Broadcast()), s.sub(h, topic.Broadcast()), s.sub(h, topic.Broadcast())
	p := s.tracked(h, topic.TrackedOptions{})
	r, _ := p.Publish(ctxT(t), 1)
	ia, ib := recvValue(t, a, 1), recvValue(t, b, 1)
	recvValue(t, c, 1)
	if err := a.Ack(ia.ID); err != nil {
		t.Fatal(err)
	}
	reason := errors.New("sink C failed")
	if err := b.Nack(ib.ID, reason); err != nil {
		t.Fatal(err)
	}
	expectResult(t, r, topic.Nacked, reason)
}

func testAckAllLeaves(s *suite) {
	t := s.t
	h := s.topic("t", ackAll(8))
	a, b := s.sub(h, topic.Broadcast()), s.sub(h, topic.Broadcast())
	p := s.tracked(h, topic.TrackedOptions{})
	// b leaves without even receiving it.
	r, _ := p.Publish(ctxT(t), 1)
	it := recvValue(t, a, 1)
	if err := a.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	pending(t, r)
	b.Close()
	expectResult(t, r, topic.Nacked, topic.ErrDeliveryDropped)
	// c receives it and leaves before acking.
	c := s.sub(h, topic.Broadcast())
	r, _ = p.Publish(ctxT(t), 2)
	recvValue(t, c, 2)
	c.Close()
	expectResult(t, r, topic.Nacked, topic.ErrDeliveryDropped)
	it = recvValue(t, a, 2)
	isErr(t, "Ack after the publish was nacked", a.Ack(it.ID), topic.ErrMessageNotTracked)
	// d is disconnected for lag (on_lag disconnect) before acking.
	d := s.sub(h, topic.Broadcast())
	r, _ = p.Publish(ctxT(t), 3)
	it = recvValue(t, a, 3)
	for i := range 8 {
		publish(t, h, 10+i)
	}
	expectResult(t, r, topic.Nacked, topic.ErrLagged)
	if it := recv(t, d); it.Lagged == 0 {
		t.Fatalf("lagging subscriber got %+v, want its final lag notice", it)
	}
	recvClosed(t, d)
	isErr(t, "Ack after nack", a.Ack(it.ID), topic.ErrMessageNotTracked)
}

func testAckAllEmpty(s *suite) {
	t := s.t
	h := s.topic("t", ackAll(8))
	p := s.tracked(h, topic.TrackedOptions{})
	r, err := p.Publish(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	expectResult(t, r, topic.Nacked, topic.ErrNoSubscribers)
	got := make(chan topic.Result, 1)
	if out, err := p.TryPublishFunc(2, func(r topic.Result) { got <- r }); err != nil || out != topic.Published {
		t.Fatalf("TryPublishFunc = %v, %v", out, err)
	}
	select {
	case r := <-got:
		if r.Outcome != topic.Nacked || !errors.Is(r.Reason, topic.ErrNoSubscribers) {
			t.Fatalf("got %+v", r)
		}
	default:
		t.Fatal("empty eligible set not resolved at once")
	}
}

func testAckAllRejections(s *suite) {
	t := s.t
	good := ackAll(8)
	for name, mutate := range map[string]func(*topic.Options){
		"propagation-disabled": func(o *topic.Options) { o.AckPropagation.Mode = topic.PropagationDisabled },
		"on_lag-drop_oldest":   func(o *topic.Options) { o.Broadcast.OnLag = topic.DropOldest },
		"mixed-topic":          func(o *topic.Options) { o.Mode = topic.Mixed },
		"balanced-only-topic":  func(o *topic.Options) { o.Mode = topic.BalancedOnly },
	} {
		o := good
		mutate(&o)
		_, err := s.broker.CreateTopic(topic.Name(name), o, s.backend)
		if err == nil {
			t.Fatalf("%s: ack_mode all accepted", name)
		}
		if !contains(err.Error(), "broadcast.ack_mode") {
			t.Fatalf("%s: error %q does not name broadcast.ack_mode", name, err)
		}
		if _, ok := s.broker.Topic(topic.Name(name)); ok {
			t.Fatalf("%s: rejected topic registered", name)
		}
	}
	s.topic("good", good)
}

// counts returns st without its Partitions, which a durable backend
// that knows its partitions fills (see topic.StateStats).
func counts(st topic.Stats) topic.Stats {
	st.Partitions = nil
	return st
}

func testStats(s *suite) {
	t := s.t
	h := s.topic("t", mixed(1, 2))
	if st := h.Stats(); !reflect.DeepEqual(st, topic.Stats{}) {
		t.Fatalf("fresh Stats = %+v", st)
	}
	g1 := s.sub(h, group("a"))
	s.sub(h, group("a"))
	g2 := s.sub(h, group("b"))
	b1 := s.sub(h, topic.Broadcast())
	s.sub(h, topic.Broadcast())
	publish(t, h, 1)
	if out, _ := h.TryPublish(2); out != topic.DroppedOnFull {
		t.Fatalf("TryPublish = %v", out)
	}
	recvValue(t, g1, 1)
	recvValue(t, g2, 1)
	p := s.tracked(h, topic.TrackedOptions{})
	if _, err := p.Publish(ctxT(t), 3); err != nil {
		t.Fatal(err)
	}
	recvValue(t, g1, 3)
	recvValue(t, g2, 3)
	publish(t, h, 4) // b1 has read nothing: ring of 2 overwrote 1
	st := counts(h.Stats())
	want := topic.Stats{BalancedGroups: 2, BroadcastSubscribers: 2, Published: 3, Dropped: 1, InFlight: 1}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("Stats = %+v, want %+v", st, want)
	}
	if it := recv(t, b1); it.Lagged != 1 {
		t.Fatalf("got %+v, want Lagged=1", it)
	}
	if st := h.Stats(); st.Lagged != 1 {
		t.Fatalf("Lagged = %d, want 1", st.Lagged)
	}
	g2.Close()
	if st := h.Stats(); st.BalancedGroups != 1 {
		t.Fatalf("BalancedGroups after the last member of b left = %d", st.BalancedGroups)
	}
}

func testCapabilities(s *suite) {
	t := s.t
	c := s.backend.Capabilities()
	if len(c.Modes) == 0 {
		t.Fatal("backend declares no mode")
	}
	for _, m := range c.Modes {
		o := topic.Options{Mode: m}.WithDefaults()
		if err := topic.CheckCapabilities(s.backend.Name(), c, o); err != nil {
			// Defaults use the zero policies; a backend must support them.
			t.Fatalf("default options of declared mode %v: %v", m, err)
		}
		h, err := s.broker.CreateTopic(topic.Name("cap-"+m.String()), o, s.backend)
		if err != nil {
			t.Fatalf("declared mode %v: %v", m, err)
		}
		if h.Options().Mode != m {
			t.Fatalf("mode %v, want %v", h.Options().Mode, m)
		}
	}
	for _, m := range []topic.Mode{topic.BalancedOnly, topic.BroadcastOnly, topic.Mixed} {
		if slices.Contains(c.Modes, m) {
			continue
		}
		_, err := s.broker.CreateTopic("undeclared", topic.Options{Mode: m}, s.backend)
		isErr(t, "undeclared mode", err, topic.ErrUnsupportedMode)
	}
}

func testAckAllDuplicateAck(s *suite) {
	t := s.t
	h := s.topic("t", ackAll(8))
	a, b := s.sub(h, topic.Broadcast()), s.sub(h, topic.Broadcast())
	p := s.tracked(h, topic.TrackedOptions{})
	r, _ := p.Publish(ctxT(t), 1)
	ia, ib := recvValue(t, a, 1), recvValue(t, b, 1)
	if err := a.Ack(ia.ID); err != nil {
		t.Fatal(err)
	}
	isErr(t, "second Ack by the same subscriber", a.Ack(ia.ID), topic.ErrMessageNotTracked)
	isErr(t, "Nack after Ack by the same subscriber", a.Nack(ia.ID, nil), topic.ErrMessageNotTracked)
	pending(t, r)
	if err := b.Ack(ib.ID); err != nil {
		t.Fatal(err)
	}
	expectResult(t, r, topic.Acked, nil)
}

func testDurableRedelivers(s *suite) {
	t := s.t
	h := s.topic("t", balanced(8))
	m1 := s.sub(h, group("g"))
	publish(t, h, 1, 2, 3)
	it := recvValue(t, m1, 1)
	if err := m1.Ack(it.ID); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	recvValue(t, m1, 2)
	recvValue(t, m1, 3)
	m1.Close() // 2 and 3 received, never settled
	m2 := s.sub(h, group("g"))
	recvValue(t, m2, 2)
	recvValue(t, m2, 3)
	recvNothing(t, m2) // 1 was acked: never again
	// What is published later reaches the group as before.
	publish(t, h, 4)
	recvValue(t, m2, 4)
}

func testDurableNack(s *suite) {
	t := s.t
	h := s.topic("t", balanced(8))
	m := s.sub(h, group("g"))
	publish(t, h, 1)
	it := recvValue(t, m, 1)
	if it.Redeliveries != 0 {
		t.Fatalf("first delivery has Redeliveries %d, want 0", it.Redeliveries)
	}
	reason := errors.New("handler failed")
	if err := m.Nack(it.ID, reason); err != nil {
		t.Fatalf("Nack: %v", err)
	}
	again := recvValue(t, m, 1)
	if again.Redeliveries != 1 {
		t.Fatalf("the delivery after a nack has Redeliveries %d, want 1", again.Redeliveries)
	}
	if err := m.Ack(again.ID); err != nil {
		t.Fatalf("Ack of the redelivery: %v", err)
	}
	m.Close()
	m2 := s.sub(h, group("g"))
	recvNothing(t, m2)
}

func testDurableSettles(s *suite) {
	t := s.t
	h := s.topic("t", balanced(8))
	m := s.sub(h, group("g"))
	publish(t, h, 1, 2)
	a, b := recvValue(t, m, 1), recvValue(t, m, 2)
	if err := m.Ack(a.ID); err != nil {
		t.Fatalf("Ack untracked: %v", err)
	}
	if err := m.Nack(b.ID, nil); err != nil {
		t.Fatalf("Nack untracked: %v", err)
	}
	isErr(t, "second Ack", m.Ack(a.ID), topic.ErrMessageNotTracked)
	isErr(t, "Ack after Nack", m.Ack(b.ID), topic.ErrMessageNotTracked)
	isErr(t, "Ack unknown", m.Ack(123456), topic.ErrMessageNotTracked)
}

func testDurableStats(s *suite) {
	t := s.t
	h := s.topic("t", mixed(8, 8))
	if st := h.Stats(); !reflect.DeepEqual(st, topic.Stats{}) {
		t.Fatalf("fresh Stats = %+v", st)
	}
	a := s.sub(h, group("a"))
	s.sub(h, group("a"))
	b := s.sub(h, group("b"))
	bc := s.sub(h, topic.Broadcast())
	publish(t, h, 1, 2, 3)
	for _, sub := range []*topic.Subscription[int]{bc} {
		for v := 1; v <= 3; v++ {
			recvValue(t, sub, v)
		}
	}
	want := topic.Stats{BalancedGroups: 2, BroadcastSubscribers: 1, Published: 3}
	if st := counts(h.Stats()); !reflect.DeepEqual(st, want) {
		t.Fatalf("Stats = %+v, want %+v", st, want)
	}
	b.Close()
	bc.Close()
	wait.Within(t, patience, "group b and the broadcast subscriber gone from Stats", func() bool {
		st := h.Stats()
		return st.BalancedGroups == 1 && st.BroadcastSubscribers == 0
	})
	_ = a
}

func testHeaders(s *suite) {
	t := s.t
	h := s.topic("t", mixed(8, 8))
	g := s.sub(h, group("g"))
	bc := s.sub(h, topic.Broadcast())
	hdr := topic.Headers{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "origin": "edge/1 ü"}
	if out, err := h.PublishWithHeaders(ctxT(t), 1, hdr, topic.Block); err != nil || out != topic.Published {
		t.Fatalf("PublishWithHeaders = %v, %v", out, err)
	}
	publish(t, h, 2)
	for _, sub := range []*topic.Subscription[int]{g, bc} {
		it := recvValue(t, sub, 1)
		if !maps.Equal(it.Headers, hdr) {
			t.Fatalf("received headers %v, want %v", it.Headers, hdr)
		}
		if it := recvValue(t, sub, 2); len(it.Headers) != 0 {
			t.Fatalf("a message published without headers arrived with %v", it.Headers)
		}
	}
	if len(hdr) != 2 || hdr["origin"] != "edge/1 ü" {
		t.Fatalf("the publisher's map was changed: %v", hdr)
	}
}
