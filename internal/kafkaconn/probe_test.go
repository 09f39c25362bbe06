package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/testnet"
)

var errKind = errors.New("cannot connect")

// Guarantee: one broker that answers is enough, whatever the others do.
func TestProbeSucceedsWhenOneBrokerAnswers(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := append([]string{testnet.SilentListener(t), testnet.ClosedPort(t)}, c.ListenAddrs()...)
	if err := Probe(t.Context(), errKind, brokers, sarama.NewConfig(), 300*time.Millisecond, nil); err != nil {
		t.Fatalf("Probe with one broker answering = %v", err)
	}
}

// Guarantee: when no broker answers within the timeout, the error wraps
// the caller's kind and names every broker with its cause, as clean
// rewrote it; it does not wrap a context error when the context has not
// ended.
func TestProbeNamesEveryBrokerWhenNoneAnswers(t *testing.T) {
	silent, refused := testnet.SilentListener(t), testnet.ClosedPort(t)
	clean := func(err error) error { return fmt.Errorf("cleaned: %w", err) }
	err := Probe(t.Context(), errKind, []string{silent, refused}, sarama.NewConfig(), 200*time.Millisecond, clean)
	if !errors.Is(err, errKind) {
		t.Fatalf("Probe = %v, want an error wrapping the kind", err)
	}
	for _, want := range []string{fmt.Sprintf("%q: cleaned: ", silent), fmt.Sprintf("%q: cleaned: ", refused)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Probe's error %q does not say %s", err, want)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("Probe's error %q wraps a context error; the context has not ended", err)
	}
}

// Guarantee: the context's deadline bounds the probe as the timeout
// does, and the error then wraps context.DeadlineExceeded.
func TestProbeReturnsByItsContextsDeadline(t *testing.T) {
	done := make(chan error, 1)
	// Registered before the listener: runs after its cleanup has closed
	// the connections, so that a probe still running ends and is waited for.
	t.Cleanup(func() { <-done })
	addr := testnet.SilentListener(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	go func() { done <- Probe(ctx, errKind, []string{addr}, sarama.NewConfig(), time.Minute, nil) }()
	select {
	case err := <-done:
		done <- err // for the cleanup
		if !errors.Is(err, errKind) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Probe = %v, want an error wrapping the kind and context.DeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Probe with a 300ms deadline still runs after 10s")
	}
}

// Guarantee: a probe's configuration bounds every network step by the
// probe's time, keeps the shorter timeouts cfg has, and leaves sarama's
// own ApiVersions exchange, which does not fail on a timeout, to
// ProbeBroker.
func TestProbeConfigBoundsEveryStep(t *testing.T) {
	cfg := sarama.NewConfig()
	cfg.Net.DialTimeout, cfg.Net.ReadTimeout, cfg.Net.WriteTimeout = time.Second, time.Minute, time.Minute
	pc := ProbeConfig(cfg, 2*time.Second)
	if pc.Net.DialTimeout != time.Second || pc.Net.ReadTimeout != 2*time.Second || pc.Net.WriteTimeout != 2*time.Second || pc.ApiVersionsRequest {
		t.Fatalf("ProbeConfig within 2s = dial %v, read %v, write %v, ApiVersionsRequest %t; want 1s, 2s, 2s, false",
			pc.Net.DialTimeout, pc.Net.ReadTimeout, pc.Net.WriteTimeout, pc.ApiVersionsRequest)
	}
	if !cfg.ApiVersionsRequest || cfg.Net.ReadTimeout != time.Minute {
		t.Fatal("ProbeConfig changed the configuration it copied")
	}
}
