package pulsartopology_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// BenchmarkPublishToAck measures a publish → pipeline (two processors) →
// ack round per message through the Pulsar backend on an in-process
// broker: plain (a hold and a DLQ declared, unused), and sequenced over 64
// keys. Four publishers run at once, each waiting for its receipts. Besides
// the wall time it reports the process's CPU time per message
// (cpu-ns/msg: the broker runs in the process, so it counts too), far
// steadier than the wall time on a shared machine.
func BenchmarkPublishToAck(b *testing.B) {
	for _, c := range []struct {
		name string
		b    *topology.Builder
	}{
		{"plain", topology.New("bench").Hold(time.Second).DLQ()},
		{"sequenced", topology.New("bench").Sequenced(topology.Skip).Hold(time.Second).DLQ()},
	} {
		b.Run(c.name, func(b *testing.B) {
			be := newBackend(b, options(testbroker.Pulsar(b), topic.Codec[topologytest.Msg](topic.JSONCodec[topologytest.Msg]{})))
			q, err := be.Declare(context.Background(), build(b, c.b))
			if err != nil {
				b.Fatal(err)
			}
			start := cpuTime()
			topologytest.PublishToAck(b, q, 4, time.Minute)
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/msg")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
