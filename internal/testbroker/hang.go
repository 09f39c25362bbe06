package testbroker

import (
	"sync"

	"github.com/apache/pulsar-client-go/pulsar"
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
