package pulsar_test

import (
	"log/slog"
	"os"
	"testing"

	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pulsar-client-go (v0.21.0; consumer_partition.go, grabConn)
		// starts a goroutine on every consumer (re)connection that sends on
		// the consumer's connectedCh (room for one) with no way out; a consumer closed right
		// after a reconnection (an unloaded topic, a broker-side close)
		// leaves it blocked for the process's life.
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionConsumer).grabConn.func1"),
	)
}

// quietLogger keeps pulsar-client-go's logs out of the test output unless
// PULSAR_TEST_LOG is set.
func quietLogger() plog.Logger {
	if os.Getenv("PULSAR_TEST_LOG") != "" {
		return plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})))
	}
	return plog.NewLoggerWithSlog(slog.New(slog.DiscardHandler))
}
