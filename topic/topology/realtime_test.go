package topology_test

import (
	"context"
	"os"
	"testing"

	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// The suite's real-time mode, which backends with network I/O use, checked
// on the in-memory backend: polled conditions and delays within Slack. It
// takes about half a minute, so it runs only with
// TOPOLOGYTEST_REALTIME=1.
func TestMemorySuiteRealTime(t *testing.T) {
	if os.Getenv("TOPOLOGYTEST_REALTIME") == "" {
		t.Skip("set TOPOLOGYTEST_REALTIME=1 to run the suite in real time (about 30s)")
	}
	topologytest.Run(t, topologytest.Config{
		NewBackend: func(t *testing.T) topology.Backend[topologytest.Msg] {
			m, err := topology.NewMemory[topologytest.Msg](topology.MemoryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close(context.Background()) })
			return m
		},
	})
}
