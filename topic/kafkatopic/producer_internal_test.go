package kafkatopic

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/IBM/sarama/mocks"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/kafkaorder"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
)

// patienceInternal bounds every wait for something that must happen.
const patienceInternal = 30 * time.Second

// errProducerClosed is the error enqueue reports in these tests once the
// producer is closed.
var errProducerClosed = errors.New("producer closed")

// heldProduces starts a backend, publish buffer buffer, on a cluster that
// holds every produce request until unblock is called (at the latest when
// the test ends). held receives when the first one arrives. The backend's
// producer sends one record per request, one request at a time, through
// channels of one.
func heldProduces(t *testing.T, buffer int) (b *Backend[int], held <-chan struct{}, unblock func()) {
	c := testbroker.Kafka(t, kfake.SeedTopics(1, "held"))
	cfg := testbroker.SaramaConfig()
	cfg.ChannelBufferSize = 1
	cfg.Producer.Flush.MaxMessages = 1
	cfg.Net.MaxOpenRequests = 1
	b, err := New(Options[int]{Brokers: c.ListenAddrs(), Config: cfg, Codec: topic.IntCodec{},
		PublishBuffer: buffer, AdminTimeout: patienceInternal, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	held, unblock = holdEvery(t, c, kmsg.Produce)
	t.Cleanup(func() {
		unblock()
		if err := b.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return b, held, unblock
}

// holdEvery makes c hold every request of key until unblock is called (at
// the latest when the test ends), answering the others meanwhile. held
// receives when the first one arrives.
func holdEvery(t *testing.T, c *kfake.Cluster, key kmsg.Key) (held <-chan struct{}, unblock func()) {
	release := make(chan struct{})
	unblock = sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)
	arrived := make(chan struct{}, 1)
	c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		select {
		case arrived <- struct{}{}:
		default:
		}
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	return arrived, unblock
}

// tryEnqueue hands b's producer a record without waiting for room, and
// returns its completion if the producer took it.
func tryEnqueue(t *testing.T, b *Backend[int]) *completion {
	c := b.prod.get()
	c.msg = sarama.ProducerMessage{Topic: "held", Value: sarama.ByteEncoder("v")}
	ok, err := b.prod.enqueue(context.Background(), c, false, nil, errProducerClosed)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return nil
	}
	return c
}

// Guarantee: a publish that does not wait for room (TryPublish,
// on_full: drop_newest) is refused only once Options.PublishBuffer
// records wait for the producer: while the broker holds every produce
// request, the producer takes at least PublishBuffer records before it
// refuses one, and each record it took is stored once the broker answers.
func TestANonWaitingPublishIsRefusedOnlyOnceThePublishBufferIsFull(t *testing.T) {
	const buffer = 64
	b, held, unblock := heldProduces(t, buffer)
	var taken []*completion
	for {
		c := tryEnqueue(t, b)
		if c == nil {
			break
		}
		taken = append(taken, c)
		if len(taken) == 1 {
			<-held // the broker holds the first produce: nothing leaves
		}
	}
	if len(taken) < buffer {
		t.Fatalf("the producer refused a record after taking %d, want at least PublishBuffer (%d)", len(taken), buffer)
	}
	unblock()
	for i, c := range taken {
		if err := <-c.done; err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
}

// Guarantee: closing the producer (as Backend.Close does) returns only
// once every record it took has its outcome reported, so a publish under
// way when the backend closes learns whether its record was stored.
func TestClosingTheProducerWaitsForTheOutcomeOfEveryRecordItTook(t *testing.T) {
	b, held, unblock := heldProduces(t, 1)
	c := tryEnqueue(t, b)
	if c == nil {
		t.Fatal("the producer refused the first record")
	}
	<-held
	closed := make(chan struct{})
	go func() {
		b.prod.close()
		close(closed)
	}()
	wait.Within(t, patienceInternal, "the producer to stop taking records", func() bool {
		b.prod.mu.RLock()
		defer b.prod.mu.RUnlock()
		return b.prod.closed
	})
	select {
	case <-closed:
		t.Fatal("the producer closed while the broker still held a record it took")
	default:
	}
	unblock()
	<-closed
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("the record the producer took: %v", err)
		}
	default:
		t.Fatal("the producer closed before reporting the outcome of a record it took")
	}
}

// Guarantee: while a record the single-record producer refused as out of
// order waits to be sent again through a fresh producer (here, while the
// cluster holds that producer's request for a producer id), the outcome
// of the single-record producer's next record is reported; the refused
// record's is, once the fresh producer has sent it.
func TestARecordSentAgainThroughAFreshProducerHoldsUpNoOtherOutcome(t *testing.T) {
	c := testbroker.Kafka(t, kfake.SeedTopics(1, "fresh"))
	opts := Options[int]{Brokers: c.ListenAddrs(), Config: testbroker.SaramaConfig(), Codec: topic.IntCodec{}}.WithDefaults()
	aloneClient, err := sarama.NewClient(c.ListenAddrs(), aloneConfig(kafkaorder.Producer(opts.saramaConfig())))
	if err != nil {
		t.Fatal(err)
	}
	held, unblock := holdEvery(t, c, kmsg.InitProducerID)
	mcfg := mocks.NewTestConfig()
	mcfg.Producer.Return.Successes = true
	alone := mocks.NewAsyncProducer(t, mcfg)
	alone.ExpectInputAndFail(sarama.ErrOutOfOrderSequenceNumber)
	alone.ExpectInputAndSucceed()
	p := &producer{alone: alone, aloneClient: aloneClient, freshMore: make(chan struct{}, 1), freshDone: make(chan struct{})}
	p.wg.Add(1)
	go p.results(alone, false)
	go p.sendFreshAll()
	send := func(v string) *completion {
		cp := &completion{done: make(chan error, 1), alone: true}
		cp.msg = sarama.ProducerMessage{Topic: "fresh", Value: sarama.StringEncoder(v), Metadata: cp}
		alone.Input() <- &cp.msg
		return cp
	}
	refused := send("refused")
	select {
	case <-held:
	case <-time.After(patienceInternal):
		t.Fatal("the refused record was never sent again through a fresh producer")
	}
	next := send("next")
	select {
	case err := <-next.done:
		if err != nil {
			t.Fatalf("the next record: %v", err)
		}
	case <-time.After(patienceInternal):
		t.Fatal("the next record's outcome was not reported while the refused one waited for a fresh producer")
	}
	unblock()
	if err := <-refused.done; err != nil {
		t.Fatalf("the refused record sent again through a fresh producer: %v", err)
	}
	alone.AsyncClose()
	p.wg.Wait()
}
