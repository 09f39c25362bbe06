package pulsartopology

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/topic"
)

// heldClient makes producers whose sends get no receipt: each waits until
// its context ends or its producer is closed, which fails it with
// pulsar.ErrProducerClosed, as pulsar-client-go's Close fails the sends
// still waiting.
type heldClient struct {
	pulsar.Client
	created, closed atomic.Int32
}

func (c *heldClient) CreateProducer(pulsar.ProducerOptions) (pulsar.Producer, error) {
	c.created.Add(1)
	return &heldProducer{c: c, done: make(chan struct{})}, nil
}

type heldProducer struct {
	pulsar.Producer
	c    *heldClient
	once sync.Once
	done chan struct{}
}

func (p *heldProducer) Send(ctx context.Context, _ *pulsar.ProducerMessage) (pulsar.MessageID, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.done:
		return nil, pulsar.ErrProducerClosed
	}
}

func (p *heldProducer) Close() {
	p.once.Do(func() {
		p.c.closed.Add(1)
		close(p.done)
	})
}

// retiredWhileASendWaits returns a backend on a heldClient, its
// Options.OperationTimeout op, whose producer on "topic" a send retired
// by ending its deadline (in a synctest bubble, a second after the call)
// while another send, bounded by t's context alone, waits on it; that
// send's error comes on waiting once it returns.
func retiredWhileASendWaits(t *testing.T, op time.Duration) (*Backend[int], *heldClient, <-chan error) {
	t.Helper()
	client := &heldClient{}
	b, err := New(Options[int]{Client: client, Codec: topic.IntCodec{}, OperationTimeout: op})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() { waiting <- b.sendWithin(t.Context(), "topic", &pulsar.ProducerMessage{}) }()
	synctest.Wait()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := b.sendWithin(ctx, "topic", &pulsar.ProducerMessage{}); !errors.Is(err, ErrSend) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a send with no receipt by its deadline = %v, want ErrSend and context.DeadlineExceeded", err)
	}
	return b, client, waiting
}

// Guarantee: a producer retired by a send that ended its deadline is not
// closed while another send (one bounded by its context alone, as a
// dead-letter reader's marker) still waits on it, and is closed
// Options.OperationTimeout after it was retired at the latest, that send
// then failing with ErrSend; the next send makes another producer.
func TestARetiredProducerIsClosedWithinTheOperationTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const op = 10 * time.Second
		b, client, waiting := retiredWhileASendWaits(t, op)
		defer func() {
			if err := b.Close(t.Context()); err != nil {
				t.Error(err)
			}
		}()
		synctest.Wait()
		if n := client.closed.Load(); n != 0 {
			t.Fatalf("%d producers closed while a send still waits on the retired one, want 0", n)
		}
		time.Sleep(op - time.Nanosecond)
		synctest.Wait()
		if n := client.closed.Load(); n != 0 {
			t.Fatalf("%d producers closed before Options.OperationTimeout passed since the retirement, want 0", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if n := client.closed.Load(); n != 1 {
			t.Fatalf("%d producers closed once Options.OperationTimeout passed since the retirement, want 1", n)
		}
		select {
		case err := <-waiting:
			if !errors.Is(err, ErrSend) || !errors.Is(err, pulsar.ErrProducerClosed) {
				t.Errorf("the send waiting on the retired producer closed = %v, want ErrSend and pulsar.ErrProducerClosed", err)
			}
		default:
			t.Fatal("the send waiting on the retired producer still waits once it was closed")
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_ = b.sendWithin(ctx, "topic", &pulsar.ProducerMessage{})
		if n := client.created.Load(); n != 2 {
			t.Errorf("%d producers created once the first was retired, want 2", n)
		}
	})
}

// Guarantee: the backend's Close closes a retired producer at once, even
// while a send still waits on it, rather than waiting for that send or
// for Options.OperationTimeout.
func TestCloseClosesARetiredProducerAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, client, waiting := retiredWhileASendWaits(t, time.Minute)
		began := time.Now()
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(began); d != 0 {
			t.Errorf("Close took %v with a retired producer, want no time", d)
		}
		if n := client.closed.Load(); n != 1 {
			t.Errorf("%d producers closed once Close returned, want 1", n)
		}
		if err := <-waiting; err == nil {
			t.Error("the send waiting on the retired producer returned nil once the backend closed it")
		}
	})
}
