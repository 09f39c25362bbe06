// Package testbroker starts the in-process brokers the topic and topology
// backends' tests run on (kfake for Kafka, pulsartest for Pulsar), each
// closed when its test ends, and gives the clients' settings those tests
// share. Only tests import it.
package testbroker

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// Kafka starts a one-broker kfake cluster that lets group sessions be as
// short as 100ms, with opts after those, closed at t's cleanup.
func Kafka(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100 * time.Millisecond)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// HangKafka makes c answer no request from now on until the test ends, as
// a cluster that stopped responding does. The test must have registered
// c's Close before (Kafka does): cleanups run last first, so the requests
// held are let go before the cluster closes.
func HangKafka(t testing.TB, c *kfake.Cluster) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		<-release
		return nil, nil, false
	})
}

// HangKafkaKey makes c answer no request of key from now on until the
// test ends, as a cluster whose metadata requests (kmsg.Metadata) time out
// does: the other requests are answered, but those behind a held one on
// its connection (a broker answers a connection's requests in order). The
// test must have registered c's Close before, as with HangKafka. At the
// test's end the held requests are let go and answered before c closes
// (within HungGrace): a held request woken while the cluster closes would
// leave the cluster's loop waiting for ever. The channel returned is
// closed once the first request of key is held.
func HangKafkaKey(t testing.TB, c *kfake.Cluster, key kmsg.Key) (first <-chan struct{}) {
	var (
		mu       sync.Mutex
		released bool
		held     sync.WaitGroup
		once     sync.Once
	)
	release := make(chan struct{})
	firstCh := make(chan struct{})
	t.Cleanup(func() {
		mu.Lock()
		released = true
		close(release)
		mu.Unlock()
		answered := make(chan struct{})
		go func() { held.Wait(); close(answered) }()
		select {
		case <-answered:
		case <-time.After(HungGrace):
			t.Errorf("the requests held by HangKafkaKey were not answered %v after they were let go", HungGrace)
		}
	})
	c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		if released {
			mu.Unlock()
			c.DropControl()
			return nil, nil, false
		}
		held.Add(1)
		mu.Unlock()
		defer held.Done()
		c.KeepControl()
		once.Do(func() { close(firstCh) })
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	return firstCh
}

// HungKafka lists the goroutines a kfake cluster keeps while it holds
// requests (HangKafka, HangKafkaKey) and until it closes, and the one
// process-wide meter ticker of sarama's metric registry, for goleak to
// ignore.
func HungKafka() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).run"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).runControl.func1"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).SleepControl.func1"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*bsleep).waitQueue"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*broker).listen"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*clientConn).read"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*clientConn).write"),
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	}
}

// HungDeadline is the deadline ReturnsByDeadline gives a call, and
// HungGrace how much longer it waits for the call to return: far less
// than sarama's Net.ReadTimeout (30s), or than a pulsar-client-go client's
// operation timeout as such a test sets it, so a call that waits for a
// hung cluster's answer instead of its context fails the check.
const (
	HungDeadline = time.Second
	HungGrace    = 10 * time.Second
)

// ReturnsByDeadline calls call with a context of HungDeadline, the cluster
// hung (HangKafka, or pulsartest's Withhold), and reports whether it
// returned within HungGrace more.
// It fails t unless call returned an error wrapping
// context.DeadlineExceeded by then; what names the call in the failure.
func ReturnsByDeadline(t testing.TB, what string, call func(context.Context) error) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), HungDeadline)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s with the cluster hung = %v, want an error wrapping context.DeadlineExceeded", what, err)
		}
		return true
	case <-time.After(HungDeadline + HungGrace):
		t.Errorf("%s with the cluster hung still runs %v after its %v deadline", what, HungGrace, HungDeadline)
		return false
	}
}

// SaramaConfig is a sarama configuration for fast group operations on
// kfake: short sessions, heartbeats, backoffs and fetch waits.
func SaramaConfig() *sarama.Config {
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

// Pulsar starts a pulsartest broker logging to PulsarLogger, closed at t's
// cleanup.
func Pulsar(t testing.TB) *pulsartest.Broker {
	t.Helper()
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{Logger: PulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// PulsarLogger discards what it is given unless the environment variable
// PULSAR_TEST_LOG is set, when it writes everything to standard error.
func PulsarLogger() *slog.Logger {
	if os.Getenv("PULSAR_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// RefuseListOffsets is the answer to req, a ListOffsets request, that
// refuses every partition it asks for with code (a kerr error's Code).
func RefuseListOffsets(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.(*kmsg.ListOffsetsRequest).Topics {
		answer := kmsg.NewListOffsetsResponseTopic()
		answer.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			p.ErrorCode = code
			answer.Partitions = append(answer.Partitions, p)
		}
		resp.Topics = append(resp.Topics, answer)
	}
	return resp
}

// RefuseDescribeConfigs makes c refuse to describe the configuration of
// any resource, for good (TOPIC_AUTHORIZATION_FAILED on each), as a
// cluster does for a client without DescribeConfigs permission.
func RefuseDescribeConfigs(c *kfake.Cluster) { RefuseDescribeConfigsSaying(c, nil) }

// RefuseDescribeConfigsSaying is RefuseDescribeConfigs with msg (when not
// nil) as the error message of each refusal.
func RefuseDescribeConfigsSaying(c *kfake.Cluster, msg *string) {
	c.ControlKey(kmsg.DescribeConfigs.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.DescribeConfigsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, r := range req.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			rr.ErrorCode = kerr.TopicAuthorizationFailed.Code
			rr.ErrorMessage = msg
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
}
