package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// liveConns bounds the connections one live member keeps to the 3 brokers
// of a test cluster: franz-go opens up to 4 per broker (one each for
// requests, produces, fetches and the group), sarama fewer.
const liveConns = 3 * 4

// Guarantee: a stage whose member fails and restarts closes the connections
// of the member gone: after each of many restarts the stage holds no more
// connections to the brokers than one live member does, and none once the
// pipeline stopped.
func TestAMemberRestartClosesTheConnectionsOfTheMemberGone(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const (
			group  = "g-restart-conns"
			rounds = 10
		)
		c := newCluster(t, 1)
		f := failGroup(c, group)
		brokers := c.ListenAddrs()
		conns := func() int { return testnet.ConnsTo(t, brokers...) }
		before := conns()
		src := cl.new(t, sourceOptions(c, group))
		opts := pipelineOpts("restartconns", src, 1, newLedger(), nil)
		opts.Producer.Restart = producer.Restart{MaxRestarts: 2 * rounds, Window: time.Hour,
			Backoff: time.Millisecond, MaxBackoff: time.Millisecond}
		p := startPipeline(t, opts)
		member := func() string {
			if m := src.Stats().Members; len(m) == 1 {
				return m[0].MemberID
			}
			return ""
		}
		last := ""
		wait.Within(t, 30*time.Second, "the first member", func() bool { last = member(); return last != "" })
		for i := range rounds {
			if err := f.fail(context.Background()); err != nil {
				t.Fatal(err)
			}
			prev := last
			wait.Within(t, 30*time.Second, "a new member after restart", func() bool {
				last = member()
				return last != "" && last != prev
			}, func() string { return fmt.Sprintf("restart %d of %d", i+1, rounds) })
			// A member that did not close its client would leave its
			// connections open until the brokers or its idle timeout cut
			// them: each restart would add some.
			testnet.SettlesAtMost(t, 5*time.Second, fmt.Sprintf("connections to the brokers after restart %d", i+1), before+liveConns, conns)
		}
		if r := p.Stats().Producers[0].Restarts; r < rounds {
			t.Fatalf("%d restarts, want %d", r, rounds)
		}
		t.Logf("%d connections before, %d with the live member after %d restarts", before, conns(), rounds)
		stopPipeline(t, p)
		testnet.SettlesAtMost(t, 10*time.Second, "connections to the brokers once stopped", before, conns)
	})
}

// Guarantee: a source that ran and was closed leaves no connection to the
// brokers open, whether it consumed or found nothing new: many rounds of
// New, Run (a member joins, and consumes in the first round) and Close,
// each with a source of its own in the same group, end each with no more
// connections than before.
func TestEachClosedSourceClosesItsConnections(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const (
			group  = "g-rounds-conns"
			rounds = 20
		)
		c := newCluster(t, 2)
		ends := produce(t, c, 2, 0, 10)
		brokers := c.ListenAddrs()
		conns := func() int { return testnet.ConnsTo(t, brokers...) }
		before := conns()
		for i := range rounds {
			src := cl.new(t, sourceOptions(c, group))
			l := newLedger()
			p := startPipeline(t, pipelineOpts("rounds", src, 1, l, nil))
			wait.Within(t, 30*time.Second, fmt.Sprintf("a member in round %d", i+1), func() bool { return len(src.Stats().Members) == 1 })
			if i == 0 {
				wait.Within(t, 30*time.Second, "the records consumed", func() bool { return l.covers(ends) })
			}
			if conns() == before {
				t.Fatalf("round %d: no connection to the brokers counted while a member runs", i+1)
			}
			stopPipeline(t, p)
			testnet.SettlesAtMost(t, 10*time.Second, fmt.Sprintf("connections to the brokers after %d sources closed", i+1), before, conns)
		}
	})
}

// Guarantee: the connection check before a member starts closes its
// connections whether it fails (a broker that accepts connections and
// never answers, past ConnectTimeout, after which the stage restarts the
// source) or is cut short by the pipeline's stop: many failed checks
// leave no more than the one still running open, and each stopped one
// none.
func TestAConnectionCheckThatFailsOrIsStoppedLeavesNoConnection(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const rounds = 10
		// silent returns a broker that never answers, options of a source
		// of it and a count of the connections to it.
		silent := func(t *testing.T, connect time.Duration) (kafka.Options, func() int) {
			addr := testnet.SilentListener(t)
			return kafka.Options{Brokers: []string{addr}, GroupID: "g-check-conns", Topics: []string{testTopic},
					ConnectTimeout: connect, Logger: testLogger()},
				func() int { return testnet.ConnsTo(t, addr) }
		}
		t.Run("failed", func(t *testing.T) {
			opts, conns := silent(t, 100*time.Millisecond)
			src := cl.new(t, opts)
			po := pipelineOpts("check-failed", src, 1, newLedger(), nil)
			po.Producer.Restart = producer.Restart{MaxRestarts: 10 * rounds, Window: time.Hour,
				Backoff: time.Millisecond, MaxBackoff: time.Millisecond}
			p := startPipeline(t, po)
			defer stopPipeline(t, p)
			wait.Within(t, 30*time.Second, fmt.Sprintf("%d failed connection checks", rounds), func() bool {
				return p.Stats().Producers[0].Restarts >= rounds
			})
			// One check may be under way: it holds one connection.
			testnet.SettlesAtMost(t, 5*time.Second, fmt.Sprintf("connections to the broker after %d failed checks", rounds), 1, conns)
		})
		t.Run("stopped", func(t *testing.T) {
			opts, conns := silent(t, time.Minute)
			for i := range rounds {
				src := cl.new(t, opts)
				po := pipelineOpts("check-stopped", src, 1, newLedger(), nil)
				p := startPipeline(t, po)
				wait.Within(t, 10*time.Second, "the connection check to dial the broker", func() bool { return conns() > 0 })
				if err := p.Stop(context.Background()); err != nil {
					t.Fatalf("stop: %v", err)
				}
				testnet.SettlesAtMost(t, 5*time.Second, fmt.Sprintf("connections to the broker after %d stopped checks", i+1), 0, conns)
			}
		})
	})
}

// Guarantee: a pipeline stopped while its source's connection check waits
// on a broker that never answers stops at once: the check's probes end
// with the stage, instead of holding the stop until ConnectTimeout or the
// shutdown timeout, whichever comes first.
func TestAStopDuringTheConnectionCheckDoesNotWaitForIt(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		addr := testnet.SilentListener(t)
		src := cl.new(t, kafka.Options{Brokers: []string{addr}, GroupID: "g-check-stop", Topics: []string{testTopic},
			ConnectTimeout: time.Minute, Logger: testLogger()})
		po := pipelineOpts("check-stop", src, 1, newLedger(), nil)
		po.ShutdownTimeout = time.Minute
		p := startPipeline(t, po)
		wait.Within(t, 10*time.Second, "the connection check to dial the broker", func() bool { return testnet.ConnsTo(t, addr) > 0 })
		start := time.Now()
		err := p.Stop(context.Background())
		// Far below the minute the check, and the stop's own bound, allow.
		if took := time.Since(start); err != nil || took > 10*time.Second {
			t.Fatalf("Stop during the connection check = %v after %v, want nil at once", err, took)
		}
	})
}
