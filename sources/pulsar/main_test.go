package pulsar_test

import (
	"log/slog"
	"os"
	"testing"

	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quietLogger keeps pulsar-client-go's logs out of the test output unless
// PULSAR_TEST_LOG is set.
func quietLogger() plog.Logger {
	if os.Getenv("PULSAR_TEST_LOG") != "" {
		return plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})))
	}
	return plog.NewLoggerWithSlog(slog.New(slog.DiscardHandler))
}
