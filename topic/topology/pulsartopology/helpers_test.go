package pulsartopology_test

import (
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// options are backend options for a broker, with short client timeouts.
func options[T any](b *pulsartest.Broker, codec topic.Codec[T]) pulsartopology.Options[T] {
	o := pulsartopology.Options[T]{ServiceURL: b.URL(), Codec: codec, Logger: testbroker.PulsarLogger(),
		OperationTimeout: 20 * time.Second}
	o.ClientOptions.OperationTimeout = 5 * time.Second
	o.ClientOptions.ConnectionTimeout = 5 * time.Second
	return o
}

// newBackend returns a backend closed at t's cleanup.
func newBackend[T any](t testing.TB, o pulsartopology.Options[T]) *pulsartopology.Backend[T] {
	t.Helper()
	be, err := pulsartopology.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "the backend", be.Close) })
	return be
}

// declared declares top on be and subscribes a reader of its group (the
// backend's Close closes it).
func declared[T any](t testing.TB, be *pulsartopology.Backend[T], top *topology.Topology) (topology.Queues[T], topology.Reader[T]) {
	t.Helper()
	q, err := be.Declare(ctxT(t), top)
	if err != nil {
		t.Fatal(err)
	}
	r, err := q.Subscribe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return q, r
}

// deadReaderOf declares topology name with a DLQ on a backend of its own,
// its Options.OperationTimeout op, and subscribes a dead-letter reader of
// it, for the caller to close.
func deadReaderOf(t *testing.T, br *pulsartest.Broker, name string, op time.Duration) topology.Reader[string] {
	t.Helper()
	o := options(br, topic.Codec[string](topic.StringCodec{}))
	o.OperationTimeout = op
	be := newBackend(t, o)
	q, err := be.Declare(ctxT(t), build(t, topology.New(name).DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := q.SubscribeDead(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
