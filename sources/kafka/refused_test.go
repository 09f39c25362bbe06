package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: a source whose brokers refuse connections (a cluster that is
// down) fails each run after its ConnectTimeout, as against brokers that
// never answer, so that the pipeline's default restart rules give it up by
// MaxConsecutiveFailures, after about five connect timeouts, not by the
// fast-failure window (MaxRestarts within Window) within a second.
func TestABrokerRefusingConnectionsIsGivenUpAfterConsecutiveConnectTimeouts(t *testing.T) {
	givenUpAfterConsecutiveConnectTimeouts(t, testnet.ClosedPort)
}

// Guarantee: a source whose broker address is held by something else,
// which answers garbage and closes the connection, is given up as one
// whose brokers refuse connections: by MaxConsecutiveFailures, after about
// five connect timeouts.
func TestABrokerAnsweringGarbageIsGivenUpAfterConsecutiveConnectTimeouts(t *testing.T) {
	givenUpAfterConsecutiveConnectTimeouts(t, testnet.GarbageListener)
}

// givenUpAfterConsecutiveConnectTimeouts checks, with each client, that a
// pipeline whose source's only broker is at listen(t) gives the source up
// by MaxConsecutiveFailures with ErrConnect, after at least as many
// connect timeouts.
func givenUpAfterConsecutiveConnectTimeouts(t *testing.T, listen func(testing.TB) string) {
	eachClient(t, func(t *testing.T, cl client) {
		const connect = 2 * time.Second
		src := cl.new(t, kafka.Options{Brokers: []string{listen(t)}, GroupID: "g-refused", Topics: []string{testTopic},
			ConnectTimeout: connect, Logger: testLogger()})
		po := pipelineOpts("refused", src, 1, newLedger(), nil)
		start := time.Now()
		p := startPipeline(t, po)
		defer func() { _ = p.Stop(context.Background()) }() // returns the RestartError checked below
		select {
		case <-p.Done():
		case <-time.After(2 * time.Minute):
			t.Fatal("the pipeline has not given up after 2m")
		}
		took := time.Since(start)
		var re *producer.RestartError
		if !errors.As(p.Err(), &re) || re.Rule != producer.RuleMaxConsecutiveFailures || !errors.Is(re, kafka.ErrConnect) {
			t.Fatalf("pipeline error %v, want a RestartError by %s wrapping ErrConnect", p.Err(), producer.RuleMaxConsecutiveFailures)
		}
		if min := producer.DefaultMaxConsecutiveFailures * connect; took < min {
			t.Errorf("given up after %v, before %d connect timeouts (%v)", took, producer.DefaultMaxConsecutiveFailures, min)
		}
		t.Logf("given up after %v: %v", took, re)
	})
}
