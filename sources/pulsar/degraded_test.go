package pulsar_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// Guarantee: a broker that goes away under a running pipeline moves the
// stage to degraded, with an error wrapping ErrReconnecting as LastError,
// while the client reconnects its consumer within the run; once the
// broker is back and the consumer reconnected the stage runs again,
// without a restart, and receives what is published. How long the
// degrade takes (two failed attempts, each ending at the client's 1 s
// operation timeout: about 2 s) is logged, not bounded: a busy machine
// stretches it by as long as it keeps the client from running. It holds
// as well for a client whose lines go to a Logger of the caller's, which
// gets them as the client writes them.
func TestAwayBrokerDegradesTheStageUntilTheConsumerReconnects(t *testing.T) {
	t.Run("NewClient's logger", func(t *testing.T) { awayBrokerDegrades(t, nil) })
	t.Run("a Logger of the caller's", func(t *testing.T) {
		var lines logtest.Lines
		awayBrokerDegrades(t, plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(&lines, nil))))
		if lines.Count("Failed to create consumer at reconnect") == 0 {
			t.Errorf("the caller's Logger did not get the client's lines about the reconnection; it got %d lines", len(lines.All()))
		}
	})
}

func awayBrokerDegrades(t *testing.T, own plog.Logger) {
	e := newEnv(t)
	_, p, got := runAwayLogging(t, e, own)
	status := func() producer.StageStatus { return p.SourceStatus()[0] }
	state := func() string { return fmt.Sprintf("%+v", status()) }
	wait.Within(t, waitLimit, "the consumer to subscribe", func() bool {
		return len(connected(e, "away", "sub")) == 1 && status().State == producer.StateRunning
	}, state)
	addr := e.broker.Addr().String()
	if err := e.broker.Close(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	wait.Within(t, waitLimit, "the stage degraded", func() bool { return status().State == producer.StateDegraded }, state)
	st := status()
	t.Logf("degraded %v after the broker went away: %v", st.Since.Sub(down).Round(time.Millisecond), st.LastError)
	if !errors.Is(st.LastError, bpulsar.ErrReconnecting) || st.Restarts != 0 {
		t.Fatalf("status %+v, want degraded with ErrReconnecting in the first run", st)
	}
	b, err := pulsartest.Start(context.Background(), pulsartest.Options{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	e.broker = b
	back := time.Now()
	wait.Within(t, waitLimit, "the stage running again", func() bool { return status().State == producer.StateRunning }, state)
	t.Logf("running %v after the broker came back", status().Since.Sub(back).Round(time.Millisecond))
	if st := status(); st.Restarts != 0 {
		t.Fatalf("status %+v, want the first run still", st)
	}
	e.publish("away", "m", 5)
	wait.Within(t, waitLimit, "the messages published after the outage", func() bool { return got.distinct() == 5 })
}

// Guarantee: a stopped pipeline leaves no reconnection watch of its stage
// on the client it shares: the client keeps nothing of a stage once its
// run has returned.
func TestAStoppedPipelineLeavesNoReconnectionWatchOnItsClient(t *testing.T) {
	e := newEnv(t)
	client, err := bpulsar.NewClient(pulsar.ClientOptions{URL: e.broker.URL(), OperationTimeout: time.Second}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	src := bpulsar.New(bpulsar.Options{Client: client, Topics: []string{"watched"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	_, stop := run(t, src, 1, producer.Flow{}, recordAll(newReceived()))
	wait.Within(t, waitLimit, "the stage to subscribe", func() bool { return src.Stats().Consumers == 1 })
	if n := client.WatchesForTest(); n != 1 {
		t.Fatalf("%d reconnection watches while one stage runs, want 1", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := client.WatchesForTest(); n != 0 {
		t.Errorf("%d reconnection watches left on the client once the pipeline stopped, want 0", n)
	}
}
