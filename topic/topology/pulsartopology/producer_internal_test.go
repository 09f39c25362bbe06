package pulsartopology

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// slowClient is a client whose CreateProducer waits for release, as
// pulsar-client-go's does for a broker that does not answer (up to the
// client's operation timeout), and counts its calls; its producers count
// the messages sent and whether they were closed.
type slowClient struct {
	pulsar.Client
	release <-chan struct{}
	created atomic.Int32
	sent    atomic.Int32
	closed  atomic.Int32
}

func (c *slowClient) CreateProducer(pulsar.ProducerOptions) (pulsar.Producer, error) {
	c.created.Add(1)
	<-c.release
	return &countingProducer{c: c}, nil
}

type countingProducer struct {
	pulsar.Producer
	c *slowClient
}

func (p *countingProducer) Send(context.Context, *pulsar.ProducerMessage) (pulsar.MessageID, error) {
	p.c.sent.Add(1)
	return nil, nil
}

func (p *countingProducer) Close() { p.c.closed.Add(1) }

// Guarantee: sends to one topic while its producer is being created share
// that one creation, and each returns by its context's deadline with an
// error wrapping it and ErrSend; the producer created once they gave up is
// kept, so that the next send uses it without creating another, and the
// backend's Close closes it.
func TestConcurrentSendsShareOneProducerCreation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		client := &slowClient{release: release}
		b, err := New(Options[int]{Client: client, Codec: topic.IntCodec{}})
		if err != nil {
			t.Fatal(err)
		}
		const senders = 4
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		sent := make(chan error, senders)
		for range senders {
			go func() { sent <- b.send(ctx, "topic", &pulsar.ProducerMessage{}) }()
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := client.created.Load(); n != 1 {
			t.Errorf("%d sends to one topic at once started %d creations of its producer, want 1", senders, n)
		}
		for range senders {
			select {
			case err := <-sent:
				if !errors.Is(err, ErrSend) || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("a send while its producer is created = %v, want an error wrapping ErrSend and context.DeadlineExceeded", err)
				}
			default:
				close(release)
				t.Fatal("a send still waits, past its deadline, for its producer's creation")
			}
		}
		close(release)
		synctest.Wait()
		if err := b.send(t.Context(), "topic", &pulsar.ProducerMessage{}); err != nil {
			t.Fatalf("a send once the producer was created: %v", err)
		}
		if n, s := client.created.Load(), client.sent.Load(); n != 1 || s != 1 {
			t.Errorf("after the next send: %d producers created, %d messages sent; want 1 and 1", n, s)
		}
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := client.closed.Load(); n != 1 {
			t.Errorf("%d producers closed by Close, want 1", n)
		}
	})
}

// Guarantee: sends racing the backend's Close, to topics whose producers
// are still to be created, each return nil or topology.ErrClosed; the
// backend creates at most one producer per topic, and once Close has
// returned every producer it created is closed, once.
func TestSendsRacingCloseLeaveNoProducerOpen(t *testing.T) {
	const rounds, topics, senders = 50, 4, 8
	released := make(chan struct{})
	close(released)
	for round := range rounds {
		client := &slowClient{release: released}
		b, err := New(Options[int]{Client: client, Codec: topic.IntCodec{}})
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, senders*topics)
		var wg sync.WaitGroup
		for i := range senders {
			wg.Go(func() {
				for j := range topics {
					err := b.send(t.Context(), strconv.Itoa((i+j)%topics), &pulsar.ProducerMessage{})
					if err != nil && !errors.Is(err, topology.ErrClosed) {
						errs <- err
					}
				}
			})
		}
		if err := b.Close(t.Context()); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		created, closed := client.created.Load(), client.closed.Load()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: a send racing Close: %v, want nil or ErrClosed", round, err)
		}
		if created > topics || closed != created {
			t.Fatalf("round %d: %d producers created for %d topics, %d closed once Close returned; want at most one per topic, all closed",
				round, created, topics, closed)
		}
		if n := client.created.Load(); n != created {
			t.Fatalf("round %d: %d producers created after Close returned", round, n-created)
		}
	}
}
