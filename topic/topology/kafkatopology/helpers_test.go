package kafkatopology

import (
	"log/slog"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// newBackend starts a backend on the brokers, closed when the test ends.
func newBackend(t testing.TB, brokers []string) *Backend[topologytest.Msg] {
	t.Helper()
	b, err := New(Options[topologytest.Msg]{
		Brokers:       brokers,
		Config:        testbroker.SaramaConfig(),
		Codec:         topic.JSONCodec[topologytest.Msg]{},
		AdminTimeout:  30 * time.Second,
		RevokeTimeout: 2 * time.Second,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "the backend", b.Close) })
	return b
}
