package pulsartopology_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
	"github.com/boulevard-go/boulevard/validate"
)

const patience = 20 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

func full(name string) string { return "persistent://public/default/" + name }

func build(t testing.TB, b *topology.Builder) *topology.Topology {
	t.Helper()
	top, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// Guarantee: Declare creates the topics with the names the builder derives
// and the subscriptions on them (the group's on the main topic and the hold
// topics, "dead" on the DLQ) before it returns, so a message published
// right after reaches the group; declaring again keeps what they hold.
func TestDeclareCreatesDerivedTopicsAndSubscriptions(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{})))
	top := build(t, topology.New("order-settlement").ForConsumerGroup("audit").Hold(5*time.Second).Hold(30*time.Second).DLQ())
	q, err := be.Declare(ctxT(t), top)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct{ topic, sub string }{
		{"order-settlement", "audit"},
		{"order-settlement.audit-hold-5s", "audit"},
		{"order-settlement.audit-hold-30s", "audit"},
		{"order-settlement.audit-dlq", pulsartopology.DeadSubscription},
	} {
		if n := br.Backlog(full(s.topic), s.sub); n != 0 {
			t.Errorf("subscription %q on %q: backlog %d, want 0 (an existing, empty subscription)", s.sub, s.topic, n)
		}
	}
	if err := q.Publish(ctxT(t), topology.Letter[string]{Value: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := be.Declare(ctxT(t), top); err != nil {
		t.Fatal(err)
	}
	if n := br.Backlog(full("order-settlement"), "audit"); n != 1 {
		t.Errorf("after a second Declare the group's backlog is %d, want the 1 message published before", n)
	}
}

// Guarantee: a hold is a delayed message on the hold topic, marked for the
// group, with the letter's history in properties; a dead letter carries
// its death metadata in properties.
func TestHoldAndDeathTravelInProperties(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{})))
	q, err := be.Declare(ctxT(t), build(t, topology.New("props").Hold(3*time.Second).DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	first := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	last := first.Add(time.Minute)
	before := time.Now()
	if err := q.Hold(ctxT(t), 0, topology.Letter[string]{Value: "h", Key: "k", Shard: 2, Retries: 1,
		FirstFailure: first, LastFailure: last, Resume: true}); err != nil {
		t.Fatal(err)
	}
	ms := br.Messages(full("props-hold-3s"))
	if len(ms) != 1 {
		t.Fatalf("hold topic holds %d messages, want 1", len(ms))
	}
	m := ms[0]
	if d := m.DeliverAt.Sub(before); d < 3*time.Second-time.Millisecond || d > 3*time.Second+patience {
		t.Errorf("deliver at %v, %v after the hold, want about 3s", m.DeliverAt, d)
	}
	want := map[string]string{
		pulsartopology.PropGroup: "props", pulsartopology.PropShard: "2", pulsartopology.PropRetries: "1",
		pulsartopology.PropFirstFailure: first.Format(time.RFC3339Nano), pulsartopology.PropLastFailure: last.Format(time.RFC3339Nano),
		pulsartopology.PropResume: "true",
	}
	for k, v := range want {
		if m.Properties[k] != v {
			t.Errorf("property %s = %q, want %q", k, m.Properties[k], v)
		}
	}
	if m.Key != "k" || string(m.Payload) != "h" {
		t.Errorf("key %q payload %q", m.Key, m.Payload)
	}
	death := &topology.Death{Reason: topology.ReasonMaxRetries, Error: "boom", Topic: "props", Group: "props",
		Retries: 4, FirstFailure: first, LastFailure: last}
	if err := q.DeadLetter(ctxT(t), topology.Letter[string]{Value: "d", Retries: 4, Death: death, Resume: true}); err != nil {
		t.Fatal(err)
	}
	dl := br.Messages(full("props-dlq"))
	if len(dl) != 1 {
		t.Fatalf("DLQ holds %d messages, want 1", len(dl))
	}
	p := dl[0].Properties
	if p[pulsartopology.PropDeathReason] != "max_retries" || p[pulsartopology.PropDeathError] != "boom" ||
		p[pulsartopology.PropDeathTopic] != "props" || p[pulsartopology.PropDeathGroup] != "props" ||
		p[pulsartopology.PropDeathRetries] != "4" || p[pulsartopology.PropDeathFirstFailure] != first.Format(time.RFC3339Nano) ||
		p[pulsartopology.PropDeathLastFailure] != last.Format(time.RFC3339Nano) {
		t.Errorf("dead letter properties %v", p)
	}
	if _, ok := p[pulsartopology.PropResume]; ok {
		t.Errorf("a dead letter keeps %s", pulsartopology.PropResume)
	}
	// Read back, the dead letter is what was sent.
	r, err := q.SubscribeDead(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer topologytest.MustClose(t, "a reader", r.Close)
	buf := make([]topology.Letter[string], 4)
	n, err := r.Receive(ctxT(t), buf)
	if err != nil || n != 1 {
		t.Fatalf("Receive: %d, %v", n, err)
	}
	got := buf[0]
	if got.Value != "d" || got.Retries != 4 || got.Resume || got.Death == nil || *got.Death != *death {
		t.Errorf("read back %+v (death %+v), want %+v", got, got.Death, death)
	}
}

// Guarantee: a message put back on the main topic for one group (Requeue)
// reaches that group only; the other group's reader acknowledges it
// without delivering it, and does not count it as undecodable.
func TestRequeueReachesOnlyItsGroup(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{})))
	a, err := be.Declare(ctxT(t), build(t, topology.New("shared").Hold(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := be.Declare(ctxT(t), build(t, topology.New("shared").ForConsumerGroup("other").Hold(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Requeue(ctxT(t), topology.Letter[string]{Value: "for a"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Publish(ctxT(t), topology.Letter[string]{Value: "for all"}); err != nil {
		t.Fatal(err)
	}
	rb, err := b.Subscribe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer topologytest.MustClose(t, "a reader", rb.Close)
	buf := make([]topology.Letter[string], 4)
	n, err := rb.Receive(ctxT(t), buf)
	if err != nil || n != 1 || buf[0].Value != "for all" {
		t.Fatalf("group other received %d %v: %v, want only the message for all", n, err, buf[:n])
	}
	if err := rb.Settle(ctxT(t), &buf[0]); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, patience, "group other's backlog to empty", func() bool { return br.Backlog(full("shared"), "other") == 0 })
	if n := br.Backlog(full("shared"), "shared"); n != 2 {
		t.Errorf("group shared's backlog is %d, want both messages", n)
	}
	if n := rb.(topology.UndecodableCounter).Undecodable(); n != 0 {
		t.Errorf("group other's reader counts %d undecodable, want 0 (the message for a is not)", n)
	}
}

// Guarantee: a dead-letter reader's TryReceive returns everything the DLQ
// holds, then 0 once it has caught up (its marker came back), and never a
// marker; an empty DLQ gives 0 at once after the catch-up.
func TestDeadTryReceiveCatchesUp(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{})))
	q, err := be.Declare(ctxT(t), build(t, topology.New("catch").DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	read := func() []string {
		r, err := q.SubscribeDead(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		defer topologytest.MustClose(t, "a reader", r.Close)
		var got []string
		buf := make([]topology.Letter[string], 2)
		ctx := ctxT(t)
		for {
			n, err := r.TryReceive(ctx, buf)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return got
			}
			for _, l := range buf[:n] {
				got = append(got, l.Value)
			}
		}
	}
	if got := read(); len(got) != 0 {
		t.Fatalf("empty DLQ gave %v", got)
	}
	for _, v := range []string{"a", "b", "c", "d", "e"} {
		if err := q.DeadLetter(ctxT(t), topology.Letter[string]{Value: v, Death: &topology.Death{Reason: topology.ReasonRejected}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(read(), ""); got != "abcde" {
		t.Errorf("TryReceive gave %q, want abcde", got)
	}
	// Unacknowledged, they are all still there for the next reader.
	if got := strings.Join(read(), ""); got != "abcde" {
		t.Errorf("second reader got %q, want abcde", got)
	}
}

// Guarantee: Replay reports the messages of the DLQ its reader
// acknowledged and skipped because they do not decode
// (ReplayReport.Undecodable), replays the dead letters around them, and a
// later Replay meets them no more.
func TestReplayCountsTheDeadLettersThatDoNotDecode(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{})))
	q, err := be.Declare(ctxT(t), build(t, topology.New("replayed").DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	dlq, _ := q.Topology().DLQ()
	death := &topology.Death{Reason: topology.ReasonRejected, Topic: "replayed", Group: q.Topology().ConsumerGroup()}
	if err := q.DeadLetter(ctxT(t), topology.Letter[string]{Value: "a", Death: death}); err != nil {
		t.Fatal(err)
	}
	if _, err := br.Publish(ctxT(t), full(dlq), pulsartest.Message{Payload: []byte("bad"),
		Properties: map[string]string{pulsartopology.PropRetries: "-1"}}); err != nil {
		t.Fatal(err)
	}
	if err := q.DeadLetter(ctxT(t), topology.Letter[string]{Value: "b", Death: death}); err != nil {
		t.Fatal(err)
	}
	rep, err := topology.Replay(ctxT(t), q, topology.ReplayOptions[string]{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Replayed) != 2 || rep.Kept != 0 || rep.Undecodable != 1 {
		t.Fatalf("Replay replayed %d, kept %d, met %d that do not decode; want 2, 0 and 1", len(rep.Replayed), rep.Kept, rep.Undecodable)
	}
	if rep, err = topology.Replay(ctxT(t), q, topology.ReplayOptions[string]{}); err != nil || len(rep.Replayed) != 0 || rep.Undecodable != 0 {
		t.Fatalf("a second Replay: %+v, %v; want nothing replayed and nothing undecodable (acknowledged)", rep, err)
	}
}

// Guarantee: options are validated, each broken rule named.
func TestOptionsValidated(t *testing.T) {
	_, err := pulsartopology.New(pulsartopology.Options[string]{})
	var es validate.Errors
	if !errors.As(err, &es) || !es.Has("pulsartopology.codec", "required") || !es.Has("pulsartopology.serviceURL", "required_without") {
		t.Fatalf("New with no options: %v", err)
	}
	o := pulsartopology.Options[string]{ServiceURL: "pulsar://x:6650", Codec: topic.StringCodec{}, ReadAhead: -1, MaxReconnectToBroker: -1}
	o.ClientOptions.URL = "pulsar://y:6650"
	_, err = pulsartopology.New(o)
	if !errors.As(err, &es) || !es.Has("pulsartopology.readAhead", "gte") || !es.Has("pulsartopology.clientOptions.url", "owned") ||
		!es.Has("pulsartopology.maxReconnectToBroker", "gte") {
		t.Fatalf("New with a negative read-ahead, a negative MaxReconnectToBroker and a client URL: %v", err)
	}
	// pulsar-client-go ticks every third of a nack delay: below 3ns its
	// ticker panics, so anything under a millisecond is refused.
	for _, d := range []time.Duration{-time.Second, 2} {
		o := pulsartopology.Options[string]{ServiceURL: "pulsar://x:6650", Codec: topic.StringCodec{}, RedeliveryDelay: d}
		if _, err = pulsartopology.New(o); !errors.As(err, &es) || !es.Has("pulsartopology.redeliveryDelay", "gte") {
			t.Fatalf("New with a redelivery delay of %v: %v", d, err)
		}
	}
	// Each upper bound is refused one past it, naming the field.
	for field, o := range map[string]pulsartopology.Options[string]{
		"pulsartopology.redeliveryDelay":      {RedeliveryDelay: pulsartopology.MaxRedeliveryDelay + 1},
		"pulsartopology.maxReconnectToBroker": {MaxReconnectToBroker: pulsartopology.MaxReconnectToBrokerLimit + 1},
	} {
		o.ServiceURL, o.Codec = "pulsar://x:6650", topic.StringCodec{}
		if _, err = pulsartopology.New(o); !errors.As(err, &es) || !es.Has(field, "lte") {
			t.Fatalf("New one past the bound of %s: %v, want an lte error on it", field, err)
		}
	}
	for _, c := range []struct {
		d    time.Duration
		rule string
	}{{-time.Second, "gte"}, {time.Hour + time.Second, "lte"}} {
		o := pulsartopology.Options[string]{ServiceURL: "pulsar://x:6650", Codec: topic.StringCodec{}, OperationTimeout: c.d}
		if _, err = pulsartopology.New(o); !errors.As(err, &es) || !es.Has("pulsartopology.operationTimeout", c.rule) {
			t.Fatalf("New with an operation timeout of %v: %v, want a %s error on pulsartopology.operationTimeout", c.d, err, c.rule)
		}
	}
}

// Guarantee: each documented upper bound is itself accepted: an
// OperationTimeout of 1 hour, a RedeliveryDelay of MaxRedeliveryDelay and
// a MaxReconnectToBroker of MaxReconnectToBrokerLimit, as are the smallest
// values set (a RedeliveryDelay of 1ms, a MaxReconnectToBroker of 1).
func TestOptionsAreAcceptedAtTheirBounds(t *testing.T) {
	for what, o := range map[string]pulsartopology.Options[string]{
		"OperationTimeout 1h":                {OperationTimeout: time.Hour},
		"RedeliveryDelay MaxRedeliveryDelay": {RedeliveryDelay: pulsartopology.MaxRedeliveryDelay},
		"RedeliveryDelay 1ms":                {RedeliveryDelay: time.Millisecond},
		"MaxReconnectToBroker at its limit":  {MaxReconnectToBroker: pulsartopology.MaxReconnectToBrokerLimit},
		"MaxReconnectToBroker 1":             {MaxReconnectToBroker: 1},
	} {
		o.ServiceURL, o.Codec = "pulsar://x:6650", topic.StringCodec{}
		if err := o.WithDefaults().Validate(); err != nil {
			t.Errorf("%s refused: %v", what, err)
		}
	}
}

// Guarantee: ReadAhead is bounded by MaxReadAhead: accepted at it, refused
// one past it with an error naming pulsartopology.readAhead and the rule.
func TestReadAheadIsBoundedByMaxReadAhead(t *testing.T) {
	o := pulsartopology.Options[string]{ServiceURL: "pulsar://x:6650", Codec: topic.StringCodec{}, ReadAhead: pulsartopology.MaxReadAhead}
	if err := o.WithDefaults().Validate(); err != nil {
		t.Fatalf("ReadAhead at MaxReadAhead refused: %v", err)
	}
	o.ReadAhead++
	var es validate.Errors
	if err := o.WithDefaults().Validate(); !errors.As(err, &es) || !es.Has("pulsartopology.readAhead", "lte") {
		t.Fatalf("ReadAhead past MaxReadAhead: Validate = %v, want an lte error on pulsartopology.readAhead", err)
	}
}

// failing is a codec whose Encode fails while fail is set.
type failing struct {
	topic.StringCodec
	fail *atomic.Bool
}

func (c failing) Encode(v string) ([]byte, error) {
	if c.fail.Load() {
		return nil, errors.New("encoder down")
	}
	return c.StringCodec.Encode(v)
}

// Guarantee: a letter whose hand-off failed (here its Hold) is not
// acknowledged when it is settled: the broker delivers it to the group
// again, so a failing hold loses nothing.
func TestFailedHandOffIsDeliveredAgain(t *testing.T) {
	br := testbroker.Pulsar(t)
	var fail atomic.Bool
	o := options(br, topic.Codec[string](failing{fail: &fail}))
	o.RedeliveryDelay = 50 * time.Millisecond
	be := newBackend(t, o)
	q, err := be.Declare(ctxT(t), build(t, topology.New("handoff").Hold(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(ctxT(t), topology.Letter[string]{Value: "x"}); err != nil {
		t.Fatal(err)
	}
	r, err := q.Subscribe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer topologytest.MustClose(t, "a reader", r.Close)
	buf := make([]topology.Letter[string], 1)
	if n, err := r.Receive(ctxT(t), buf); err != nil || n != 1 {
		t.Fatalf("Receive: %d, %v", n, err)
	}
	fail.Store(true)
	if err := q.Hold(ctxT(t), 0, buf[0]); err == nil {
		t.Fatal("Hold succeeded with a failing codec")
	}
	fail.Store(false)
	if err := r.Settle(ctxT(t), &buf[0]); !errors.Is(err, pulsartopology.ErrNotSettled) {
		t.Fatalf("Settle after a failed hold: %v, want ErrNotSettled", err)
	}
	if n, err := r.Receive(ctxT(t), buf); err != nil || n != 1 || buf[0].Value != "x" {
		t.Fatalf("Receive again: %d, %v, %v", n, err, buf[0])
	}
	if err := r.Settle(ctxT(t), &buf[0]); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, patience, "the backlog to empty", func() bool { return br.Backlog(full("handoff"), "handoff") == 0 })
}

// Guarantee: a dead-letter reader catches up even when another reader of
// the DLQ's subscription receives its marker: the other hands it back,
// never delivering it.
func TestDeadMarkerHandedBack(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{})))
	q, err := be.Declare(ctxT(t), build(t, topology.New("two").DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	other, err := q.SubscribeDead(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var delivered atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]topology.Letter[string], 8)
		for {
			n, err := other.Receive(ctx, buf)
			if err != nil {
				return
			}
			delivered.Add(int32(n))
		}
	}()
	defer func() {
		cancel()
		<-done
		topologytest.MustClose(t, "the other reader", other.Close)
	}()
	r, err := q.SubscribeDead(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer topologytest.MustClose(t, "a reader", r.Close)
	buf := make([]topology.Letter[string], 8)
	tctx := ctxT(t)
	for i := range 6 {
		n, err := r.TryReceive(tctx, buf)
		if err != nil || n != 0 {
			t.Fatalf("catch-up %d: %d, %v; want 0, nil", i, n, err)
		}
	}
	if n := delivered.Load(); n != 0 {
		t.Errorf("the other reader delivered %d markers", n)
	}
	var handedBack int64
	for _, c := range br.Consumers(full("two-dlq"), pulsartopology.DeadSubscription) {
		handedBack += c.Nacked
	}
	if handedBack == 0 {
		t.Fatal("no marker reached the other reader: the test checks nothing")
	}
}

// Guarantee: closing the backend ends its readers (a waiting Receive
// returns ErrClosed) and every later operation returns ErrClosed.
func TestCloseEndsEverything(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{})))
	top := build(t, topology.New("closing").Hold(time.Second).DLQ())
	q, r := declared(t, be, top)
	got := make(chan error, 1)
	go func() {
		_, err := r.Receive(ctxT(t), make([]topology.Letter[string], 1))
		got <- err
	}()
	if err := be.Close(ctxT(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, topology.ErrClosed) {
			t.Errorf("a waiting Receive returned %v, want ErrClosed", err)
		}
	case <-time.After(patience):
		t.Fatal("a waiting Receive did not return after Close")
	}
	if _, err := be.Declare(ctxT(t), top); !errors.Is(err, topology.ErrClosed) {
		t.Errorf("Declare after Close: %v", err)
	}
	if err := q.Publish(ctxT(t), topology.Letter[string]{Value: "x"}); !errors.Is(err, topology.ErrClosed) {
		t.Errorf("Publish after Close: %v", err)
	}
	if err := q.Hold(ctxT(t), 0, topology.Letter[string]{Value: "x"}); !errors.Is(err, topology.ErrClosed) {
		t.Errorf("Hold after Close: %v", err)
	}
	if _, err := q.Subscribe(ctxT(t)); !errors.Is(err, topology.ErrClosed) {
		t.Errorf("Subscribe after Close: %v", err)
	}
}

// Guarantee: a message whose history properties hold a negative shard or
// retry count (sent by another producer of the main topic) is bad input:
// it is acknowledged, skipped and counted (Undecodable) like one that does
// not decode, and never reaches a source, whose next retry of it would
// pick hold queue -1.
func TestNegativeCountPropertiesAreSkipped(t *testing.T) {
	br := testbroker.Pulsar(t)
	be := newBackend(t, options(br, topic.Codec[string](topic.StringCodec{})))
	q, err := be.Declare(ctxT(t), build(t, topology.New("counts").Hold(time.Second).DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := q.Subscribe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer topologytest.MustClose(t, "a reader", r.Close)
	for _, p := range []string{pulsartopology.PropRetries, pulsartopology.PropShard} {
		if _, err := br.Publish(ctxT(t), full("counts"), pulsartest.Message{Payload: []byte("bad " + p),
			Properties: map[string]string{p: "-1"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Publish(ctxT(t), topology.Letter[string]{Value: "good"}); err != nil {
		t.Fatal(err)
	}
	buf := make([]topology.Letter[string], 1)
	if n, err := r.Receive(ctxT(t), buf); err != nil || n != 1 {
		t.Fatalf("Receive: %d, %v", n, err)
	}
	if got := buf[0]; got.Value != "good" {
		t.Errorf("received %q (retries %d, shard %d) first, want the well-formed message (the others skipped)",
			got.Value, got.Retries, got.Shard)
	}
	if n := r.(topology.UndecodableCounter).Undecodable(); n != 2 {
		t.Errorf("Undecodable() = %d, want 2 (both messages with a negative count)", n)
	}
}

// Guarantee: on a sequenced topology a retry whose hold failed is
// delivered again by the broker (after RedeliveryDelay) and handled, and
// the later messages of its key follow it: a failed hold loses nothing and
// stalls no key.
func TestSequencedFailedHoldKeepsItsKeyMoving(t *testing.T) {
	br := testbroker.Pulsar(t)
	var fail atomic.Bool
	o := options(br, topic.Codec[string](failing{fail: &fail}))
	o.RedeliveryDelay = 50 * time.Millisecond
	be := newBackend(t, o)
	q, err := be.Declare(ctxT(t), build(t, topology.New("stall").Sequenced(topology.Skip).Hold(time.Second).DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	src, err := topology.NewSource(topology.SourceOptions[string]{Queues: q, Logger: testbroker.PulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var handled []string
	published := make(chan struct{}) // k2 too: the codec fails from k1's hold on
	var publishedOnce sync.Once
	publishDone := func() { publishedOnce.Do(func() { close(published) }) }
	p, err := pipeline.New(pipeline.Options[string, string]{
		Name:     "stall",
		Logger:   testbroker.PulsarLogger(),
		Producer: producer.Options[string]{Source: src},
		Processors: processor.Options[string, string]{Handle: func(_ context.Context, m *message.Message[string]) (string, error) {
			mu.Lock()
			handled = append(handled, m.Data)
			first := len(handled) == 1
			mu.Unlock()
			if first {
				<-published
				fail.Store(true) // its hold fails
				return "", topology.Retry(errors.New("gateway down"))
			}
			return m.Data, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	defer publishDone() // before the stop, even when a publish fails
	pub, err := topology.NewPublisher(q, topology.PublisherOptions[string]{Key: func(string) string { return "k" }})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"k1", "k2"} {
		if err := pub.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
	}
	publishDone()
	wait.Within(t, patience, "the hold to fail", func() bool { return src.Stats().Retried == 1 })
	fail.Store(false)
	wait.Within(t, patience, "k1 again, then k2, acked", func() bool { return src.Stats().Acked == 2 }, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("handled %v, stats %+v", handled, src.Stats())
	})
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"k1", "k1", "k2"}; !slices.Equal(handled, want) {
		t.Errorf("handled %v, want %v", handled, want)
	}
}
