package pulsartopology_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: while the consumers of a sequenced topology's group are
// replaced one by one, as in a rolling deploy, each key's letters are
// handled in order but for a retry out in a hold queue while its key
// moved, none is lost, and a letter is handled successfully again only
// after it was (see topologytest.RollingRestart). Several consumers read
// the group while the deploy runs; one finishes it, as the Pulsar
// backend's order per key through holds asks.
func TestARollingRestartKeepsEachKeysOrderAndLosesNoLetter(t *testing.T) {
	b := testbroker.Pulsar(t)
	before := goleak.IgnoreCurrent()
	o := options(b, topic.Codec[topologytest.Msg](topic.JSONCodec[topologytest.Msg]{}))
	topologytest.RollingRestart(t, topologytest.ChurnConfig{
		NewBackend:  func(t *testing.T) topology.Backend[topologytest.Msg] { return newBackend(t, o) },
		Instances:   2,
		OneToFinish: true,
	})
	goleak.VerifyNone(t, before, reconnectNotice)
}
