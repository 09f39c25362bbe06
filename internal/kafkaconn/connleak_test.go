package kafkaconn

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/internal/wait"
)

// Guarantee: a probe closes its connection however it ends: when the
// broker answers, when it never does (the probe's timeout), and when the
// probe's context is cancelled while it waits; many probes leave no
// connection to the broker open.
func TestAProbeLeavesNoConnectionOpen(t *testing.T) {
	const rounds = 20
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	silent := testnet.SilentListener(t)
	// A probe of the broker that answers, or cancelled, has time to
	// spare for a machine that stalls the process; only the probe of the
	// silent broker is meant to time out.
	patient := ProbeConfig(sarama.NewConfig(), time.Minute)
	short := ProbeConfig(sarama.NewConfig(), 100*time.Millisecond)
	for _, p := range []struct {
		name string
		addr string
		// probe runs one probe, and returns an error if it did not end
		// as it should.
		probe func(t *testing.T, addr string) error
	}{
		{"answered", c.ListenAddrs()[0], func(t *testing.T, addr string) error {
			return ProbeBroker(context.Background(), addr, patient)
		}},
		{"timed out", silent, func(t *testing.T, addr string) error {
			if err := ProbeBroker(context.Background(), addr, short); err == nil {
				return fmt.Errorf("a probe of a broker that never answers succeeded")
			}
			return nil
		}},
		{"cancelled", silent, func(t *testing.T, addr string) error {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- ProbeBroker(ctx, addr, patient) }()
			wait.For(t, "the probe to connect", func() bool { return testnet.ConnsTo(t, addr) > 0 })
			cancel()
			select {
			case err := <-done:
				if err == nil {
					return fmt.Errorf("a cancelled probe of a broker that never answers succeeded")
				}
				return nil
			case <-time.After(10 * time.Second):
				return fmt.Errorf("a cancelled probe still waits after 10s")
			}
		}},
	} {
		t.Run(p.name, func(t *testing.T) {
			conns := func() int { return testnet.ConnsTo(t, p.addr) }
			before := conns()
			for i := range rounds {
				if err := p.probe(t, p.addr); err != nil {
					t.Fatalf("probe %d: %v", i+1, err)
				}
				testnet.SettlesAtMost(t, 5*time.Second, fmt.Sprintf("connections to the broker after %d probes", i+1), before, conns)
			}
		})
	}
}
