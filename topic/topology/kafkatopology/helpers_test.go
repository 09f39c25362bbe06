package kafkatopology

import (
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// newCluster starts an in-process Kafka cluster (kfake) for one test.
func newCluster(t testing.TB) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// testConfig is a sarama config tuned for fast group operations on kfake.
func testConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = "boulevard-test"
	c.Consumer.Group.Session.Timeout = 2 * time.Second
	c.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	c.Consumer.Group.Rebalance.Timeout = 4 * time.Second
	c.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	c.Consumer.MaxWaitTime = 100 * time.Millisecond
	c.Consumer.Retry.Backoff = 50 * time.Millisecond
	c.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	c.Metadata.Retry.Backoff = 50 * time.Millisecond
	return c
}

// newBackend starts a backend on the brokers, closed when the test ends.
func newBackend(t testing.TB, brokers []string) *Backend[topologytest.Msg] {
	t.Helper()
	b, err := New(Options[topologytest.Msg]{
		Brokers:       brokers,
		Config:        testConfig(),
		Codec:         topic.JSONCodec[topologytest.Msg]{},
		AdminTimeout:  30 * time.Second,
		RevokeTimeout: 2 * time.Second,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}
