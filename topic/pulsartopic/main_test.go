package pulsartopic_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, ignoreGrabConn)
}

// ignoreGrabConn ignores a goroutine pulsar-client-go (v0.21.0;
// consumer_partition.go, grabConn) starts on every consumer (re)connection
// that sends on the consumer's connectedCh (room for one) with no way out;
// a consumer closed right after a reconnection leaves it blocked for the
// process's life.
var ignoreGrabConn = goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionConsumer).grabConn.func1")
