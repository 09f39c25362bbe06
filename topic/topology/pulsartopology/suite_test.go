package pulsartopology_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// The shared suite, in real time, on one in-process broker and one client,
// each subtest's topics in a namespace of their own, so that the client's
// connections close once, after the last subtest, rather than under each
// subtest's consumers; a restart crashes the backend and makes a new one
// on the same namespace.
func TestTopologySuite(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite runs in real time (about a minute)")
	}
	b := testbroker.Pulsar(t)
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: b.URL(), OperationTimeout: 5 * time.Second,
		ConnectionTimeout: 5 * time.Second, Logger: plog.NewLoggerWithSlog(testbroker.PulsarLogger())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	brokers := map[*testing.T]*pulsartopology.Options[topologytest.Msg]{}
	topologytest.Run(t, topologytest.Config{
		// A deliver-at time is in milliseconds: DeliverAfter truncates it.
		Resolution: time.Millisecond,
		NewBackend: func(t *testing.T) topology.Backend[topologytest.Msg] {
			o := options(b, topic.Codec[topologytest.Msg](topic.JSONCodec[topologytest.Msg]{}))
			o.ServiceURL, o.Client = "", client
			o.Namespace = fmt.Sprintf("suite-%d", len(brokers))
			brokers[t] = &o
			return newBackend(t, o)
		},
		Restart: func(t *testing.T, old topology.Backend[topologytest.Msg]) topology.Backend[topologytest.Msg] {
			topologytest.MustClose(t, "the backend, crashing", old.(*pulsartopology.Backend[topologytest.Msg]).Crash)
			return newBackend(t, *brokers[t])
		},
	})
}
