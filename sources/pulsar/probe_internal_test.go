package pulsar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// brokerAndClient starts a broker and a client of it, both closed when t
// ends.
func brokerAndClient(t *testing.T) (*pulsartest.Broker, pulsar.Client) {
	t.Helper()
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: b.URL(), OperationTimeout: 5 * time.Second,
		Logger: plog.NewLoggerWithSlog(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return b, client
}

// The permit-wait check tells a closed consumer from an open one by the
// client's answer: an open consumer answers GetLastMessageIDs, a closed one
// is refused with the phrase closedByClient looks for, and other failures
// (a connection lost while the client reconnects) are not taken for a
// closure. This pins the client's wording, which has no error value.
func TestClosedByClient(t *testing.T) {
	ctx := context.Background()
	b, client := brokerAndClient(t)
	if _, err := b.Publish(ctx, "probe", pulsartest.Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: "probe", SubscriptionName: "sub", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetLastMessageIDs(); err != nil {
		t.Fatalf("open consumer: %v", err)
	}
	c.Close()
	_, err = c.GetLastMessageIDs()
	if err == nil || !closedByClient(err) {
		t.Fatalf("closed consumer: got %v, want the client's refusal", err)
	}
	for _, other := range []error{errors.New("connection closed"), context.DeadlineExceeded, errors.New("server error: ServiceNotReady")} {
		if closedByClient(other) {
			t.Errorf("%v taken for a closed consumer", other)
		}
	}
}

// The source closing a consumer while a permit-wait check is asking the
// client about it must leave neither waiting: pulsar-client-go never
// answers a request queued behind a close, so close lets a check in flight
// finish first, and a check that comes after the close does not ask. The
// two are raced many times, as the window between the client's open check
// and its queueing of the request is narrow.
func TestCloseNeverStrandsAPermitWaitCheck(t *testing.T) {
	ctx := context.Background()
	_, client := brokerAndClient(t)
	const rounds = 300
	for i := range rounds {
		pc, err := client.Subscribe(pulsar.ConsumerOptions{Topic: "probe", SubscriptionName: fmt.Sprint("sub-", i), Type: pulsar.Shared})
		if err != nil {
			t.Fatal(err)
		}
		c := &consumer{c: pc, call: make(chan struct{}, 1)}
		type answer struct {
			called bool
			err    error
		}
		asked := make(chan answer, 1)
		closed := make(chan struct{})
		start := make(chan struct{})
		go func() {
			<-start
			called, err := c.askClient(ctx)
			asked <- answer{called, err}
		}()
		go func() {
			<-start
			c.close()
			close(closed)
		}()
		close(start)
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: close is still waiting", i)
		}
		select {
		case a := <-asked:
			if !a.called {
				t.Fatalf("round %d: the check did not run", i)
			}
			if a.err != nil && a.err != errClosed && !closedByClient(a.err) {
				t.Fatalf("round %d: the check failed with %v, want an answer, errClosed or the client's refusal", i, a.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the check is still waiting for the client after the consumer closed", i)
		}
		// After the close, a check reports the closure without asking.
		if called, err := c.askClient(ctx); !called || err != errClosed {
			t.Fatalf("round %d: check after close = %v, %v; want true, errClosed", i, called, err)
		}
	}
}

// Close waits for the client calls that outlived their stage only until
// its context ends: a call the client never answers does not hold it.
func TestCloseReturnsByItsDeadlineWhileAClientCallHangs(t *testing.T) {
	s := New(Options{})
	s.bg.Add(1) // a client call that has not returned
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := s.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want an error wrapping context.DeadlineExceeded", err)
	}
	s.bg.Done()
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("second Close, nothing running: %v", err)
	}
}

// heldConsumer is a pulsar.Consumer whose GetLastMessageIDs blocks until
// release is closed, and which records whether Close came while such a
// call was in flight.
type heldConsumer struct {
	pulsar.Consumer // only the methods below are called
	entered         chan struct{}
	release         chan struct{}
	inCall          atomic.Bool
	calls           atomic.Int32
	closedInCall    atomic.Bool
	closed          atomic.Bool
}

// checkInFlight returns a consumer whose permit-wait check is in its
// client call (held until h.release is closed), started on a goroutine of
// the synctest bubble.
func checkInFlight() (*heldConsumer, *consumer) {
	h := &heldConsumer{entered: make(chan struct{}), release: make(chan struct{})}
	c := &consumer{c: h, call: make(chan struct{}, 1)}
	go func() { _, _ = c.askClient(context.Background()) }()
	<-h.entered
	return h, c
}

func (h *heldConsumer) GetLastMessageIDs() ([]pulsar.TopicMessageID, error) {
	h.calls.Add(1)
	h.inCall.Store(true)
	defer h.inCall.Store(false)
	close(h.entered)
	<-h.release
	return nil, nil
}

func (h *heldConsumer) Close() {
	h.closedInCall.Store(h.inCall.Load())
	h.closed.Store(true)
}

// The source's close of a consumer waits for a permit-wait check's client
// call in flight, and closes the consumer once it returned; a check after
// the close does not call the client.
func TestCloseWaitsForAPermitWaitCheckInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, c := checkInFlight()
		go c.close()
		synctest.Wait()
		if h.closed.Load() {
			t.Fatal("the consumer was closed while the check's call was in flight")
		}
		close(h.release)
		synctest.Wait()
		if !h.closed.Load() || h.closedInCall.Load() {
			t.Fatalf("after the call returned: closed %v, closed during the call %v; want closed after it", h.closed.Load(), h.closedInCall.Load())
		}
		if called, err := c.askClient(context.Background()); !called || err != errClosed || h.calls.Load() != 1 {
			t.Fatalf("check after close = %v, %v with %d client calls; want true, errClosed, 1", called, err, h.calls.Load())
		}
	})
}

// A client call that never returns holds the close only for callWait.
func TestCloseWaitsForAPermitWaitCheckOnlySoLong(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, c := checkInFlight()
		start := time.Now()
		c.close()
		if waited := time.Since(start); waited != callWait || !h.closed.Load() {
			t.Fatalf("close returned after %v, closed %v; want after %v, closed", waited, h.closed.Load(), callWait)
		}
		close(h.release)
	})
}
