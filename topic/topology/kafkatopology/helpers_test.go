package kafkatopology

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// newBackend starts a backend on the brokers, closed when the test ends;
// each of set changes the options first.
func newBackend(t testing.TB, brokers []string, set ...func(*Options[topologytest.Msg])) *Backend[topologytest.Msg] {
	t.Helper()
	o := Options[topologytest.Msg]{
		Brokers:       brokers,
		Config:        testbroker.SaramaConfig(),
		Codec:         topic.JSONCodec[topologytest.Msg]{},
		AdminTimeout:  30 * time.Second,
		RevokeTimeout: 2 * time.Second,
		Logger:        slog.New(slog.DiscardHandler),
	}
	for _, f := range set {
		f(&o)
	}
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "the backend", b.Close) })
	return b
}

// hungCluster are the goroutines a cluster hung by testbroker.HangKafka
// or testbroker.HangKafkaKey keeps until the test ends, and sarama's process-wide metrics ticker:
// goleak checks within a test ignore them.
func hungCluster() []goleak.Option {
	return testbroker.HungKafka()
}

// newLoggedBackend is newBackend logging as text to logs, with its
// options then changed by each of set.
func newLoggedBackend(t testing.TB, brokers []string, logs io.Writer, set ...func(*Options[topologytest.Msg])) *Backend[topologytest.Msg] {
	t.Helper()
	opts := Options[topologytest.Msg]{
		Brokers:       brokers,
		Config:        testbroker.SaramaConfig(),
		Codec:         topic.JSONCodec[topologytest.Msg]{},
		AdminTimeout:  30 * time.Second,
		RevokeTimeout: 2 * time.Second,
		Logger:        slog.New(slog.NewTextHandler(logs, nil)),
	}
	for _, f := range set {
		f(&opts)
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "the backend", b.Close) })
	return b
}
