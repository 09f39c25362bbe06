package pulsartopology_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// quiet discards logs unless PULSAR_TEST_LOG is set.
func quiet() *slog.Logger {
	if os.Getenv("PULSAR_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startBroker starts an in-process broker closed at t's cleanup.
func startBroker(t testing.TB) *pulsartest.Broker {
	t.Helper()
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// options are backend options for a broker, with short client timeouts.
func options[T any](b *pulsartest.Broker, codec topic.Codec[T]) pulsartopology.Options[T] {
	o := pulsartopology.Options[T]{ServiceURL: b.URL(), Codec: codec, Logger: quiet(),
		OperationTimeout: 20 * time.Second}
	o.ClientOptions.OperationTimeout = 5 * time.Second
	o.ClientOptions.ConnectionTimeout = 5 * time.Second
	return o
}

// newBackend returns a backend closed at t's cleanup.
func newBackend[T any](t testing.TB, o pulsartopology.Options[T]) *pulsartopology.Backend[T] {
	t.Helper()
	be, err := pulsartopology.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.Close)
	return be
}
