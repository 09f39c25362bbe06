package pulsartopic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
)

// heldProducer holds every send until release is called: a broker that
// has not sent its receipts yet.
type heldProducer struct {
	pulsar.Producer
	mu   sync.Mutex
	held []func(pulsar.MessageID, *pulsar.ProducerMessage, error)
}

func (p *heldProducer) SendAsync(ctx context.Context, m *pulsar.ProducerMessage, cb func(pulsar.MessageID, *pulsar.ProducerMessage, error)) {
	if err := ctx.Err(); err != nil {
		cb(nil, m, err)
		return
	}
	p.mu.Lock()
	p.held = append(p.held, cb)
	p.mu.Unlock()
}

func (p *heldProducer) pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

// release sends the receipts of every held send.
func (p *heldProducer) release(err error) {
	p.mu.Lock()
	held := p.held
	p.held = nil
	p.mu.Unlock()
	for _, cb := range held {
		cb(nil, nil, err)
	}
}

func (p *heldProducer) Close() {}

// heldTopic is a topic whose producer holds its sends, with a pending
// queue of size pending.
func heldTopic(t *testing.T, pending int) (*pTopic[int], *heldProducer) {
	t.Helper()
	b := &Backend[int]{o: Options[int]{Codec: topic.IntCodec{}, MaxPendingMessages: pending}.WithDefaults(), topics: map[*pTopic[int]]struct{}{}}
	p := &heldProducer{}
	tp := &pTopic[int]{b: b, producer: p, opts: topic.Options{}.WithDefaults(),
		slots: make(chan struct{}, pending), closing: make(chan struct{}), shut: make(chan struct{}), producerClosed: make(chan struct{}),
		subs: map[*pSub[int]]struct{}{}, groups: map[topic.GroupName]int{}}
	tp.sends.New = func() any { return tp.newSend() }
	return tp, p
}

// Guarantee: while the producer's pending queue is full (every slot
// awaiting a receipt), TryPublish and drop_newest report DroppedOnFull and
// send nothing; a blocking publish waits for room, honours its context
// while waiting, and goes out once a receipt frees a slot.
func TestPendingQueueFull(t *testing.T) {
	tp, p := heldTopic(t, 2)
	results := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := tp.Publish(context.Background(), topic.Envelope[int]{Value: i}, topic.Block)
			results <- err
		}()
	}
	wait.Within(t, 20*time.Second, "two sends awaiting receipts", func() bool { return p.pending() == 2 })
	if out, err := tp.TryPublish(topic.Envelope[int]{Value: 3}); err != nil || out != topic.DroppedOnFull {
		t.Fatalf("TryPublish = %v, %v; want DroppedOnFull", out, err)
	}
	if out, err := tp.Publish(context.Background(), topic.Envelope[int]{Value: 3}, topic.DropNewest); err != nil || out != topic.DroppedOnFull {
		t.Fatalf("drop_newest Publish = %v, %v; want DroppedOnFull", out, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := tp.Publish(ctx, topic.Envelope[int]{Value: 3}, topic.Block); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked Publish = %v, want its context's error", err)
	}
	if n := p.pending(); n != 2 {
		t.Fatalf("%d sends, want the 2 first only", n)
	}
	blocked := make(chan error, 1)
	go func() {
		_, err := tp.Publish(context.Background(), topic.Envelope[int]{Value: 4}, topic.Block)
		blocked <- err
	}()
	p.release(nil) // the two receipts arrive
	for range 2 {
		if err := <-results; err != nil {
			t.Fatalf("first publishes: %v", err)
		}
	}
	wait.Within(t, 20*time.Second, "the blocked publish to be sent", func() bool { return p.pending() == 1 })
	p.release(nil)
	if err := <-blocked; err != nil {
		t.Fatalf("blocked publish: %v", err)
	}
}

// Guarantee: a Key or EventTime function or a codec that panics fails
// that publish with an error wrapping the *message.PanicError, and takes
// none of the topic's send slots or its send lock with it: the next
// publish goes out, and Close can take the lock.
func TestPanickingKeyFailsOnlyThatPublish(t *testing.T) {
	for _, what := range []string{"Key", "EventTime", "Encode"} {
		t.Run(what, func(t *testing.T) {
			tp, p := heldTopic(t, 1)
			boom := func(v int) {
				if v == 1 {
					panic(what)
				}
			}
			switch what {
			case "Key":
				tp.b.o.Key = func(v int) string { boom(v); return "k" }
			case "EventTime":
				tp.b.o.EventTime = func(v int) time.Time { boom(v); return time.Time{} }
			case "Encode":
				tp.b.o.Codec = panickingCodec{boom}
			}
			// Called as a pipeline's handler calls it: a panic that got
			// out of Publish would fail the message there.
			err := func() (err error) {
				defer message.Recover(&err)
				_, err = tp.Publish(context.Background(), topic.Envelope[int]{Value: 1}, topic.Block)
				return err
			}()
			var pe *message.PanicError
			if !errors.As(err, &pe) || pe.Value != what {
				t.Fatalf("Publish = %v, want an error wrapping the %s panic", err, what)
			}
			if !tp.sending.TryLock() {
				t.Fatal("the send lock is held after the panicking publish: Close would wait for it forever")
			}
			tp.sending.Unlock()
			next := make(chan error, 1)
			go func() {
				out, err := tp.TryPublish(topic.Envelope[int]{Value: 2})
				if err == nil && out != topic.Published {
					err = fmt.Errorf("outcome %v", out)
				}
				next <- err
			}()
			wait.Within(t, 20*time.Second, "the next publish sent in the topic's one slot", func() bool { return p.pending() == 1 })
			p.release(nil)
			if err := <-next; err != nil {
				t.Fatalf("TryPublish after the panic: %v", err)
			}
		})
	}
}

// panickingCodec is an IntCodec whose Encode calls boom first.
type panickingCodec struct{ boom func(int) }

func (c panickingCodec) Encode(v int) ([]byte, error) {
	c.boom(v)
	return topic.IntCodec{}.Encode(v)
}

func (panickingCodec) Decode(b []byte) (int, error) { return topic.IntCodec{}.Decode(b) }

// Guarantee: closing the topic wakes a publish waiting for room with
// ErrTopicClosed, and later publishes fail with it at once.
func TestCloseWakesBlockedPublish(t *testing.T) {
	tp, p := heldTopic(t, 1)
	first := make(chan error, 1)
	go func() {
		_, err := tp.Publish(context.Background(), topic.Envelope[int]{Value: 1}, topic.Block)
		first <- err
	}()
	wait.Within(t, 20*time.Second, "one send awaiting its receipt", func() bool { return p.pending() == 1 })
	blocked := make(chan error, 1)
	go func() {
		_, err := tp.Publish(context.Background(), topic.Envelope[int]{Value: 2}, topic.Block)
		blocked <- err
	}()
	tp.closed.Store(true)
	close(tp.closing)
	if err := <-blocked; !errors.Is(err, topic.ErrTopicClosed) {
		t.Fatalf("blocked Publish = %v, want ErrTopicClosed", err)
	}
	if _, err := tp.TryPublish(topic.Envelope[int]{Value: 3}); !errors.Is(err, topic.ErrTopicClosed) {
		t.Fatalf("TryPublish after close = %v", err)
	}
	p.release(pulsar.ErrProducerClosed)
	if err := <-first; !errors.Is(err, topic.ErrTopicClosed) {
		t.Fatalf("publish whose producer closed = %v, want ErrTopicClosed", err)
	}
}

// Guarantee: each broadcast subscriber has its own exclusive non-durable
// subscription, and it ends when the subscriber closes.
func TestBroadcastSubscriptions(t *testing.T) {
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	co := pulsar.ClientOptions{OperationTimeout: 5 * time.Second}
	be, err := New(Options[int]{ServiceURL: b.URL(), Codec: topic.IntCodec{}, SendTimeout: -1, ClientOptions: co, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close(context.Background())
	st, err := be.NewTopic(context.Background(), "t", topic.Options{Mode: topic.BroadcastOnly}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var subs []*pSub[int]
	for range 2 {
		s, err := st.Subscribe(t.Context(), topic.Broadcast(), topic.SubscriberOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		subs = append(subs, s.(*pSub[int]))
	}
	full := be.TopicName("t")
	if subs[0].name == subs[1].name {
		t.Fatalf("two broadcast subscribers share subscription %q", subs[0].name)
	}
	for _, s := range subs {
		cs := b.Consumers(full, s.name)
		if !strings.HasPrefix(s.name, BroadcastPrefix) || len(cs) != 1 || cs[0].SubType != "Failover" {
			t.Fatalf("subscription %q: %+v, want one failover consumer", s.name, cs)
		}
	}
	if got := st.Stats().BroadcastSubscribers; got != 2 {
		t.Fatalf("BroadcastSubscribers = %d", got)
	}
	subs[0].Close()
	wait.Within(t, 20*time.Second, "the closed subscriber's subscription to go", func() bool { return b.Backlog(full, subs[0].name) == -1 })
	if b.Backlog(full, subs[1].name) == -1 {
		t.Fatal("the other subscriber's subscription went too")
	}
}

// Guarantee: a tracked envelope is refused with ErrUnsupportedPolicy and
// nothing is sent: the outcome of a message handled in another process
// cannot reach its publisher.
func TestTrackedEnvelopeRefused(t *testing.T) {
	tp, p := heldTopic(t, 1)
	_, err := tp.Publish(context.Background(), topic.Envelope[int]{Value: 1, Ticket: new(topic.Ticket)}, topic.Block)
	if !errors.Is(err, topic.ErrUnsupportedPolicy) {
		t.Fatalf("tracked Publish = %v, want ErrUnsupportedPolicy", err)
	}
	if p.pending() != 0 {
		t.Fatal("a tracked envelope was sent")
	}
}

// Guarantee: closing a topic returns even when sends already made never
// get their receipts (a broker that stopped answering, SendTimeout
// disabled): Close waits for them at most DefaultSendTimeout, closes the
// producer (which drops what it holds without calling back), and a
// publish still waiting returns ErrTopicClosed; one whose context ended
// first returned its context's error.
func TestCloseReturnsWhileSendsNeverGetTheirReceipts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp, p := heldTopic(t, 4)
		tp.b.o.SendTimeout = -1
		waiting := make(chan error, 1)
		go func() {
			_, err := tp.Publish(context.Background(), topic.Envelope[int]{Value: 1}, topic.Block)
			waiting <- err
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := tp.Publish(ctx, topic.Envelope[int]{Value: 2}, topic.Block); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Publish whose receipt never comes = %v, want its context's error", err)
		}
		synctest.Wait()
		if n := p.pending(); n != 2 {
			t.Fatalf("%d sends awaiting receipts, want 2", n)
		}
		start := time.Now()
		tp.Close()
		if waited := time.Since(start); waited != DefaultSendTimeout {
			t.Fatalf("Close returned after %v, want after DefaultSendTimeout (%v)", waited, DefaultSendTimeout)
		}
		if err := <-waiting; !errors.Is(err, topic.ErrTopicClosed) {
			t.Fatalf("the publish still waiting at Close = %v, want ErrTopicClosed", err)
		}
	})
}

// Guarantee: once Close has marked the backend closed, no partition
// lookup starts (a declaration under way is refused with
// ErrBackendClosed), so the lookups the closing waits for are all
// registered before it waits.
func TestNoPartitionLookupStartsOnceClosed(t *testing.T) {
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	be, err := New(Options[int]{ServiceURL: b.URL(), Codec: topic.IntCodec{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close(context.Background())
	be.mu.Lock()
	be.closed = true // as Close does first
	be.calls.Shut()
	be.mu.Unlock()
	if _, err := be.partitions(context.Background(), be.TopicName("late")); !errors.Is(err, ErrBackendClosed) {
		t.Fatalf("a partition lookup once the backend is closed = %v, want an error wrapping ErrBackendClosed", err)
	}
}

// Guarantee: TryPublish, which has no context, waits for the broker's
// receipt at most tryPublishBound (DefaultSendTimeout) when
// Options.SendTimeout is disabled: against a broker that never answers the
// send, it returns an error wrapping pulsar.ErrSendTimeout by then, as the
// client's own send timeout fails a publish.
func TestTryPublishReturnsByItsBoundWhileTheBrokerWithholdsTheReceipt(t *testing.T) {
	if tryPublishBound != DefaultSendTimeout {
		t.Fatalf("tryPublishBound = %v, want DefaultSendTimeout (%v)", tryPublishBound, DefaultSendTimeout)
	}
	defer func(d time.Duration) { tryPublishBound = d }(tryPublishBound)
	tryPublishBound = testbroker.HungDeadline
	b := testbroker.Pulsar(t)
	co := pulsar.ClientOptions{OperationTimeout: 5 * time.Second, ConnectionTimeout: 5 * time.Second, KeepAliveInterval: time.Minute}
	be, err := New(Options[int]{ServiceURL: b.URL(), Codec: topic.IntCodec{}, SendTimeout: -1, ClientOptions: co, Logger: testbroker.PulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close(context.Background())
	st, err := be.NewTopic(context.Background(), "held", topic.Options{}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	release := b.Withhold(pulsartest.CommandSend)
	defer release() // before the topic's Close, which waits for the receipt
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := st.TryPublish(topic.Envelope[int]{Value: 1})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, pulsar.ErrSendTimeout) {
			t.Fatalf("TryPublish with the receipt withheld = %v, want an error wrapping pulsar.ErrSendTimeout", err)
		}
		if waited := time.Since(start); waited < tryPublishBound {
			t.Fatalf("TryPublish returned after %v, before its bound %v", waited, tryPublishBound)
		}
	case <-time.After(tryPublishBound + testbroker.HungGrace):
		t.Fatalf("TryPublish with the receipt withheld still waits %v after its %v bound", testbroker.HungGrace, tryPublishBound)
	}
}

// Guarantee: a subscription reads ahead at most its queue capacity: the
// consumer's channel and its receiver queues, one per partition, hold no
// more than the capacity together, wherever it leaves at least one message
// for each partition's queue, and each queue holds at least one.
func TestReadAheadStaysWithinTheCapacity(t *testing.T) {
	for capacity := 1; capacity <= 1100; capacity++ {
		for partitions := range 9 {
			channel, queue := readAhead(capacity, partitions)
			if queue < 1 || channel < 0 || channel > maxChannel {
				t.Fatalf("readAhead(%d, %d) = %d, %d: want a channel of 0 to %d and a queue of at least 1", capacity, partitions, channel, queue, maxChannel)
			}
			if p := max(partitions, 1); capacity-channel >= p && channel+queue*p > capacity {
				t.Fatalf("readAhead(%d, %d) = %d, %d: %d messages ahead, above the capacity", capacity, partitions, channel, queue, channel+queue*p)
			}
		}
	}
}
