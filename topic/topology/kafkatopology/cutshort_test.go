package kafkatopology

import (
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a pipeline stop that the shutdown timeout cuts short, with
// handlers that return only after the pipeline gave up on them, delivers
// each letter once after a restart: the source's Close has a context
// already cancelled, and the reader still commits the letters requeued
// meanwhile, so that the group never holds both a letter and its copy
// (see topologytest.CutShortStop).
func TestAStopCutShortDeliversEachLetterOnceAfterARestart(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs())
	tb := topology.New("cut-short").Hold(time.Second).DLQ()
	topologytest.CutShortStop(t, declare(t, b, tb), func() topology.Queues[msg] {
		topologytest.MustClose(t, "the backend", b.Close)
		return declare(t, newBackend(t, c.ListenAddrs()), tb)
	}, true)
}
