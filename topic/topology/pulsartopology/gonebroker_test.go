package pulsartopology_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// Guarantee: once the broker has gone away after Declare, Publish, Hold,
// Requeue and DeadLetter, and a dead-letter reader's PinEnd (its marker
// on the DLQ), on a topic the backend has no producer for fail, within Options.OperationTimeout, with an error wrapping ErrSend
// and ErrConnect that names the broker's service URL (without its user
// information) and the refusal, on one line; the backend's Close then leaves no
// goroutine running.
func TestSendsCreatingAProducerOnAGoneBrokerWrapErrConnect(t *testing.T) {
	before := goleak.IgnoreCurrent()
	const password = "pAssw0rd-in-URL-5e"
	br := testbroker.Pulsar(t)
	addr := br.Addr().String()
	o := options(br, topic.Codec[string](topic.StringCodec{}))
	o.ServiceURL = "pulsar://user:" + password + "@" + addr
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
	be.DropProducers()
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	calls := append(sends(q), send{"PinEnd", dead.(topology.EndPinner).PinEnd})
	for _, s := range calls {
		start := time.Now()
		err := s.do(context.Background())
		if d := time.Since(start); d > o.OperationTimeout+time.Second {
			t.Errorf("%s took %v with an operation timeout of %v", s.what, d, o.OperationTimeout)
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
		if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), "user@") {
			t.Errorf("%s once the broker has gone = %v, which shows the URL's user information", s.what, err)
		}
	}
	if err := be.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before, reconnectNotice)
}
