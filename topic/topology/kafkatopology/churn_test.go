package kafkatopology

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: while the members of a sequenced topology's group are
// replaced one by one, as in a rolling deploy, each key's letters are
// handled in order but for a retry out in a hold queue while its key
// moved, none is lost, and a letter is handled successfully again only
// after it was (see topologytest.RollingRestart).
func TestARollingRestartKeepsEachKeysOrderAndLosesNoLetter(t *testing.T) {
	c := testbroker.Kafka(t)
	before := goleak.IgnoreCurrent()
	topologytest.RollingRestart(t, topologytest.ChurnConfig{
		NewBackend: func(t *testing.T) topology.Backend[topologytest.Msg] {
			// A member that left the group's generation while its drain
			// ran can wait in kfake's JoinGroup until its closing is cut,
			// AdminTimeout after a stop cut short.
			return newBackend(t, c.ListenAddrs(), func(o *Options[topologytest.Msg]) { o.AdminTimeout, o.RevokeTimeout = 5*time.Second, time.Second })
		},
	})
	goleak.VerifyNone(t, before, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}
