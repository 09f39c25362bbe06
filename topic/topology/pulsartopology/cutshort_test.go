package pulsartopology_test

import (
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a pipeline stop that the shutdown timeout cuts short, with
// handlers that return only after the pipeline gave up on them, delivers
// each letter once after a restart: the source's Close has a context
// already cancelled, and the letters requeued meanwhile are still
// acknowledged, so that the subscription never holds both a letter and
// its copy (see topologytest.CutShortStop).
func TestAStopCutShortDeliversEachLetterOnceAfterARestart(t *testing.T) {
	b := testbroker.Pulsar(t)
	o := options(b, topic.Codec[topologytest.Msg](topic.JSONCodec[topologytest.Msg]{}))
	be := newBackend(t, o)
	top := build(t, topology.New("cut-short").Hold(time.Second).DLQ())
	q, err := be.Declare(ctxT(t), top)
	if err != nil {
		t.Fatal(err)
	}
	topologytest.CutShortStop(t, q, func() topology.Queues[topologytest.Msg] {
		topologytest.MustClose(t, "the backend", be.Close)
		q, err := newBackend(t, o).Declare(ctxT(t), top)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}, true)
}
