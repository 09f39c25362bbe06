package kafka_test

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/kafka/franz"
)

// testSource is what the tests use of a Kafka source, whichever its client.
type testSource interface {
	producer.Source[[]byte]
	Stats() kafka.Stats
}

// client builds sources of one Kafka client from the sarama source's
// options: the franz-go source takes the same fields, and franz-go options
// equivalent to the sarama Config's timeouts (LookupTimeout for
// Metadata.Timeout).
type client struct {
	name string
	new  func(t testing.TB, o kafka.Options) testSource
	// brokerErr is the client's error for a broker's error code.
	brokerErr func(*kerr.Error) error
}

var (
	saramaClient = client{"sarama", func(t testing.TB, o kafka.Options) testSource { return newSource(t, o) },
		func(e *kerr.Error) error { return sarama.KError(e.Code) }}
	franzClient = client{"franz", func(t testing.TB, o kafka.Options) testSource { return newFranz(t, o) },
		func(e *kerr.Error) error { return e }}
	clients = []client{saramaClient, franzClient}
)

// eachClient runs f once per client, as a subtest named after it.
func eachClient(t *testing.T, f func(t *testing.T, cl client)) {
	t.Helper()
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) { f(t, cl) })
	}
}

// eachStrategy runs f once per client and per strategy (range, which is eager,
// and cooperative-sticky), as subtests named after them.
func eachStrategy(t *testing.T, f func(t *testing.T, cl client, strategy string)) {
	t.Helper()
	eachClient(t, func(t *testing.T, cl client) {
		for _, strategy := range []string{kafka.RebalanceRange, kafka.RebalanceCooperativeSticky} {
			t.Run(strategy, func(t *testing.T) { f(t, cl, strategy) })
		}
	})
}

// franzOptions maps the sarama source's options to the franz-go source's,
// the sarama Config's group timeouts and fetch size to kgo options.
func franzOptions(o kafka.Options) franz.Options {
	fo := franz.Options{
		Brokers:           o.Brokers,
		GroupID:           o.GroupID,
		Topics:            o.Topics,
		InitialOffset:     o.InitialOffset,
		StartTime:         o.StartTime,
		BeginOffset:       o.BeginOffset,
		CommitMode:        o.CommitMode,
		Rebalance:         o.Rebalance,
		CommitInterval:    o.CommitInterval,
		FailurePolicy:     o.FailurePolicy,
		RedeliveryBackoff: o.RedeliveryBackoff,
		RevokeTimeout:     o.RevokeTimeout,
		ConnectTimeout:    o.ConnectTimeout,
		HighWaterInterval: o.HighWaterInterval,
		Unordered:         o.Unordered,
		Logger:            o.Logger,
		Telemetry:         o.Telemetry,
	}
	if c := o.Config; c != nil {
		fo.ClientOptions = saramaToKgo(c)
		fo.LookupTimeout = c.Metadata.Timeout // 0 takes the default, sarama's 10s
	}
	if fo.Rebalance == "" {
		// The sarama source's default strategy, so that a test means the
		// same with either client.
		fo.Rebalance = franz.RebalanceRange
	}
	return fo
}

// saramaToKgo is the kgo equivalent of the parts of a sarama config the
// tests set.
func saramaToKgo(c *sarama.Config) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SessionTimeout(c.Consumer.Group.Session.Timeout),
		kgo.HeartbeatInterval(c.Consumer.Group.Heartbeat.Interval),
		kgo.RebalanceTimeout(c.Consumer.Group.Rebalance.Timeout),
		kgo.FetchMaxWait(max(c.Consumer.MaxWaitTime, 10*time.Millisecond)),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MetadataMinAge(50 * time.Millisecond),
	}
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	if c.Consumer.Fetch.Default < 1024 {
		// A tiny fetch size: one record batch per fetch.
		opts = append(opts, kgo.FetchMaxPartitionBytes(c.Consumer.Fetch.Default), kgo.FetchMaxBytes(c.Consumer.Fetch.Default))
	}
	return opts
}

// withKgo returns cl whose franz-go sources also get opts, after the
// options franzOptions maps (sarama sources are cl's).
func (cl client) withKgo(opts ...kgo.Opt) client {
	if cl.name != franzClient.name {
		return cl
	}
	cl.new = func(t testing.TB, o kafka.Options) testSource {
		t.Helper()
		fo := franzOptions(o)
		fo.ClientOptions = append(fo.ClientOptions, opts...)
		src, err := franz.New(fo)
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	return cl
}

func newFranz(t testing.TB, o kafka.Options) *franz.Source {
	t.Helper()
	src, err := franz.New(franzOptions(o))
	if err != nil {
		t.Fatal(err)
	}
	return src
}
