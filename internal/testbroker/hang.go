package testbroker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// HangingClient is a pulsar.Client whose first Subscribe that Hang
// matches does not return until Release, as pulsar-client-go's does when
// it deadlocks; it then subscribes for real. Every other call goes
// through at once. A test releases it before it ends (a cleanup), and
// waits for Returned, so that no goroutine is left.
type HangingClient struct {
	pulsar.Client
	// Began is closed when the hung call begins, Returned once it has
	// returned.
	Began, Returned chan struct{}

	hang    func(pulsar.ConsumerOptions) bool
	token   chan struct{} // one token: the hung call takes it
	release chan struct{}
	once    sync.Once
}

// HangSubscribe returns a HangingClient on c, whose first Subscribe with
// options for which hang returns true hangs until Release.
func HangSubscribe(c pulsar.Client, hang func(pulsar.ConsumerOptions) bool) *HangingClient {
	h := &HangingClient{Client: c, Began: make(chan struct{}), Returned: make(chan struct{}),
		hang: hang, token: make(chan struct{}, 1), release: make(chan struct{})}
	h.token <- struct{}{}
	return h
}

// Subscribe subscribes through the client, after Release for the first
// call hang matches.
func (h *HangingClient) Subscribe(o pulsar.ConsumerOptions) (pulsar.Consumer, error) {
	if !h.hang(o) {
		return h.Client.Subscribe(o)
	}
	select {
	case <-h.token:
	default:
		return h.Client.Subscribe(o)
	}
	defer close(h.Returned)
	close(h.Began)
	<-h.release
	return h.Client.Subscribe(o)
}

// Release lets the hung call subscribe and return. Idempotent.
func (h *HangingClient) Release() { h.once.Do(func() { close(h.release) }) }

// HangPulsarSubscribe makes a client of br, closed at t's cleanup, and
// returns a HangingClient on it (see HangSubscribe) whose hung call is
// released, and waited for, at t's cleanup before the client closes.
func HangPulsarSubscribe(t testing.TB, br *pulsartest.Broker, hang func(pulsar.ConsumerOptions) bool) *HangingClient {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: br.URL(), OperationTimeout: 5 * time.Second, ConnectionTimeout: 5 * time.Second,
		Logger: plog.NewLoggerWithSlog(PulsarLogger())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	h := HangSubscribe(c, hang)
	t.Cleanup(func() {
		h.Release()
		select {
		case <-h.Began:
			<-h.Returned
		default:
		}
	})
	return h
}

// ReleaseAndWaitClosed releases h's hung call, and waits up to patience
// for the consumer it makes on subscription sub of topic full to be
// closed: one more consumer than before the release, none connected.
func (h *HangingClient) ReleaseAndWaitClosed(t testing.TB, br *pulsartest.Broker, full, sub string, patience time.Duration) {
	t.Helper()
	before := len(br.Consumers(full, sub))
	h.Release()
	<-h.Returned
	wait.Within(t, patience, "the consumer the hung call made, subscribed and closed", func() bool {
		cs := br.Consumers(full, sub)
		for _, c := range cs {
			if c.Connected {
				return false
			}
		}
		return len(cs) == before+1
	})
}

// CloseWhileHung checks that closing (a backend's Close) returns nil
// within patience while h's call still hangs.
func (h *HangingClient) CloseWhileHung(t testing.TB, closing func(context.Context) error, patience time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := closing(ctx); err != nil {
		t.Errorf("Close with the client's call still hanging: %v", err)
	}
	select {
	case <-h.Returned:
		t.Fatal("the hung call returned before it was released")
	default:
	}
}
