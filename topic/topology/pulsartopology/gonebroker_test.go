package pulsartopology_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// gonePassword is the password in the service URL of the backends whose
// broker goes away: their errors must not show it.
const gonePassword = "pAssw0rd-in-URL-5e"

// goneBackend returns a backend of br, whose service URL carries
// gonePassword, that gives up a call within 4 s and a lookup or a
// connection within 1 s, with a topology "gone" declared (a hold queue
// and a DLQ) and a dead-letter reader of it.
func goneBackend(t *testing.T, br *pulsartest.Broker) (*pulsartopology.Backend[string], topology.Queues[string], topology.Reader[string]) {
	t.Helper()
	o := options(br, topic.Codec[string](topic.StringCodec{}))
	o.ServiceURL = "pulsar://user:" + gonePassword + "@" + br.Addr().String()
	o.OperationTimeout = 4 * time.Second
	o.ClientOptions.OperationTimeout = time.Second
	o.ClientOptions.ConnectionTimeout = time.Second
	be, err := pulsartopology.New(o)
	if err != nil {
		t.Fatal(err)
	}
	q := declareHeld(t, be, "gone")
	dead, err := q.SubscribeDead(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return be, q, dead
}

// goneSends are the sends of q and the marker of its dead-letter reader.
func goneSends(q topology.Queues[string], dead topology.Reader[string]) []send {
	return append(sends(q), send{"PinEnd", dead.(topology.EndPinner).PinEnd})
}

// wantUnreached closes br, then fails t unless each of calls fails
// within 5 s (the backend's operation timeout and a second) with an error
// wrapping ErrSend and ErrConnect that names br's service URL without its
// user information and the refusal, on one line, and unless be's Close
// then leaves no goroutine running but those of before.
func wantUnreached(t *testing.T, before goleak.Option, br *pulsartest.Broker, be *pulsartopology.Backend[string], calls []send) {
	t.Helper()
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := be.Close(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		goleak.VerifyNone(t, before, reconnectNotice)
	}()
	addr := br.Addr().String()
	for _, s := range calls {
		start := time.Now()
		err := s.do(context.Background())
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s took %v with an operation timeout of 4s", s.what, d)
		}
		if !errors.Is(err, pulsartopology.ErrSend) || !errors.Is(err, pulsartopology.ErrConnect) {
			t.Errorf("%s once the broker has gone = %v, want an error wrapping ErrSend and ErrConnect", s.what, err)
			continue
		}
		// The cause is the client's latest connection failure: a refused
		// connection, or the dead reader's consumer failing to reconnect.
		if _, cause, _ := strings.Cut(err.Error(), "broker pulsar://"+addr+": "); cause == "" {
			t.Errorf("%s once the broker has gone = %v, want it to name the broker pulsar://%s and the cause", s.what, err, addr)
		}
		if strings.ContainsAny(err.Error(), "\r\n") {
			t.Errorf("%s once the broker has gone = %q, want it on one line", s.what, err)
		}
		if strings.Contains(err.Error(), gonePassword) || strings.Contains(err.Error(), "user@") {
			t.Errorf("%s once the broker has gone = %v, which shows the URL's user information", s.what, err)
		}
	}
}

// Guarantee: once the broker has gone away after Declare, Publish, Hold,
// Requeue and DeadLetter, and a dead-letter reader's PinEnd (its marker
// on the DLQ), on a topic the backend has no producer for fail, within Options.OperationTimeout, with an error wrapping ErrSend
// and ErrConnect that names the broker's service URL (without its user
// information) and the refusal, on one line; the backend's Close then leaves no
// goroutine running.
func TestSendsCreatingAProducerOnAGoneBrokerWrapErrConnect(t *testing.T) {
	before := goleak.IgnoreCurrent()
	br := testbroker.Pulsar(t)
	be, q, dead := goneBackend(t, br)
	be.DropProducers()
	wantUnreached(t, before, br, be, goneSends(q, dead))
}

// Guarantee: the same sends on topics the backend has sent to already (its
// producers made, a dead-letter reader's marker among them) fail just so once the broker has gone away: within
// Options.OperationTimeout, with an error wrapping ErrSend and
// ErrConnect that names the broker and the refusal; the backend's Close
// then leaves no goroutine running.
func TestSendsOnExistingProducersToAGoneBrokerWrapErrConnect(t *testing.T) {
	before := goleak.IgnoreCurrent()
	br := testbroker.Pulsar(t)
	be, q, dead := goneBackend(t, br)
	// The marker of PinEnd goes to the DLQ, whose producer DeadLetter makes.
	for _, s := range sends(q) {
		if err := s.do(ctxT(t)); err != nil {
			t.Fatalf("%s with the broker up = %v", s.what, err)
		}
	}
	wantUnreached(t, before, br, be, goneSends(q, dead))
}
