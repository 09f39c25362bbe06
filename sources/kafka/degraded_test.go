package kafka_test

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/kafkareach"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
)

// outageRetry is how long the members wait between two group sessions
// while the cluster is away: long enough that the 10 failed sessions
// that fail a run take longer than the outage.
const outageRetry = time.Second

// Guarantee: a cluster that goes away under a running pipeline moves the
// member's stage to degraded, with the client's error as LastError, while
// its run goes on; once the cluster is back the stage runs again (the
// group gave the member its partitions), without a restart. How long the
// degrade takes is logged, not bounded (about 200 ms with sarama, 2 s
// with franz-go, longer on a busy machine): one that came only after the
// 10 failed sessions that fail a run would come in a restarted run, which
// the test refuses. (kfake started again is a new cluster, with new
// topic ids, which the franz-go client does not read from as a cluster
// that returns would be read.) This is how the timeline of
// docs/operations.md, "A Kafka cluster that goes away under a running
// pipeline", is measured: with BOULEVARD_KAFKA_OUTAGE set to a duration
// (90s), the sources run on their clients' defaults and the cluster
// stays away that long, and -v logs each state the stage goes through,
// and when.
func TestStoppedClusterDegradesTheStageUntilItReturns(t *testing.T) {
	outage, _ := time.ParseDuration(os.Getenv("BOULEVARD_KAFKA_OUTAGE"))
	eachClient(t, func(t *testing.T, cl client) {
		port := freePort(t)
		c := portCluster(t, port)
		o := sourceOptions(c, "outage")
		if outage > 0 {
			o.Config = nil // the clients' defaults
		} else {
			cl = cl.withKgo(kgo.RetryBackoffFn(func(int) time.Duration { return outageRetry }))
			o.Config.Consumer.Group.Rebalance.Retry.Backoff = outageRetry
		}
		produce(t, c, 2, 0, 10)
		l := newLedger()
		p := startPipeline(t, pipelineOpts("outage", cl.new(t, o), 1, l, nil))
		t.Cleanup(func() {
			if outage > 0 {
				_ = p.Stop(context.Background()) // the stage may have given up: measured, not checked
				return
			}
			stopPipeline(t, p)
		})
		status := func() producer.StageStatus { return p.SourceStatus()[0] }
		waitState(t, status, producer.StateRunning, 30*time.Second, "the first read")
		wait.Within(t, 30*time.Second, "the records before the outage", func() bool { return l.covers(map[int32]int64{0: 5, 1: 5}) })

		c.Close()
		down := time.Now()
		if outage > 0 {
			logStates(t, status, down, outage)
			return
		}
		st := waitState(t, status, producer.StateDegraded, 30*time.Second, "the cluster stopped")
		t.Logf("degraded %v after the cluster stopped: %v", st.Since.Sub(down).Round(time.Millisecond), st.LastError)
		if st.LastError == nil || st.Restarts != 0 {
			t.Fatalf("status %+v, want degraded with an error, in the first run", st)
		}

		portCluster(t, port) // a new cluster: the group's session starts afresh
		back := time.Now()
		st = waitState(t, status, producer.StateRunning, 30*time.Second, "the cluster came back")
		t.Logf("running %v after the cluster came back", st.Since.Sub(back).Round(time.Millisecond))
		if st.Restarts != 0 {
			t.Fatalf("status %+v, want the first run still", st)
		}
	})
}

// logStates logs each state the stage enters for d after down, with the
// time since down and the stage's error.
func logStates(t *testing.T, status func() producer.StageStatus, down time.Time, d time.Duration) {
	var last producer.State
	for time.Since(down) < d {
		if st := status(); st.State != last {
			last = st.State
			t.Logf("%5.1fs %s (restarts %d, consecutive failures %d): %v",
				st.Since.Sub(down).Seconds(), st.State, st.Restarts, st.ConsecutiveFailures, st.LastError)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// freePort returns a TCP port of the loopback interface nothing listens
// on, for a cluster to be stopped and started again on.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// portCluster starts a one-broker kfake cluster on port, with the test
// topic of 2 partitions.
func portCluster(t *testing.T, port int) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(2, testTopic),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// startClaimingBoth starts a pipeline of src, stopped at the test's end,
// and returns its stage's status once the stage runs and its one member
// claims both partitions.
func startClaimingBoth(t *testing.T, name string, src testSource) func() producer.StageStatus {
	t.Helper()
	p := startPipeline(t, pipelineOpts(name, src, 1, newLedger(), nil))
	t.Cleanup(func() { stopPipeline(t, p) })
	status := func() producer.StageStatus { return p.SourceStatus()[0] }
	waitState(t, status, producer.StateRunning, 30*time.Second, "the start")
	wait.For(t, "the member to claim both partitions", func() bool {
		st := src.Stats()
		return len(st.Members) == 1 && len(st.Members[0].Partitions) == 2
	})
	return status
}

// waitState waits, at most limit, for the stage to be in state and
// returns its status then, failing the test with the last status seen
// otherwise.
func waitState(t *testing.T, status func() producer.StageStatus, state producer.State, limit time.Duration, after string) producer.StageStatus {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st := status()
		if st.State == state {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("stage not %s within %v of %s: %+v", state, limit, after, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Guarantee: a stage degraded by an outage that its member's group
// session outlives runs again once the cluster answers, on a topic that
// stays idle (no record comes in to say the member reads): the answers
// its client reads after the degrade (the session's fetches) end it. The
// cluster drops every request but the session's heartbeats (and what
// they need) until the stage is degraded and a while longer: no broker
// answers a fetch's leader lookup, and the answered heartbeats in
// between do not make the stage flap. With sarama only: franz-go reports no failed fetch, and
// a failed heartbeat ends its session, whose next start recovers the
// stage (TestStoppedClusterDegradesTheStageUntilItReturns).
func TestDegradedStageRunsAgainWhenTheClusterAnswersOnAnIdleTopic(t *testing.T) {
	c := newCluster(t, 2)
	o := sourceOptions(c, "idle-outage")
	o.Config.Consumer.Group.Session.Timeout = 30 * time.Second // outlives the outage
	// The outage comes once the member holds its session: one cut short
	// by it would fail the run (joins refused ten times in a row).
	status := startClaimingBoth(t, "idle-outage", saramaClient.new(t, o))

	f := testbroker.Inject(c, kmsg.Key(-1), 0, func(req kmsg.Request) bool {
		k := kmsg.Key(req.Key())
		return k != kmsg.ApiVersions && k != kmsg.FindCoordinator && k != kmsg.Heartbeat
	})
	f.Every(1)
	st := waitState(t, status, producer.StateDegraded, 30*time.Second, "the cluster dropped its requests")
	// The heartbeats answered while the leader lookups fail at each retry
	// do not end the degrade: the stage does not flap (a check that
	// something does not happen, over a few retries).
	for end := time.Now().Add(kafkareach.HeardQuiet + 3*time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if st := status(); st.State != producer.StateDegraded {
			t.Fatalf("status %+v while the cluster still drops every fetch, want degraded", st)
		}
	}
	f.Every(0)
	back := time.Now()
	t.Logf("degraded: %v", st.LastError)

	st = waitState(t, status, producer.StateRunning, kafkareach.HeardQuiet+wait.Deadline, "the cluster answered again")
	t.Logf("running %v after the cluster answered again", st.Since.Sub(back).Round(time.Millisecond))
	if st.Restarts != 0 {
		t.Fatalf("status %+v, want the first run still", st)
	}
}

// Guarantee: a cluster of three brokers one of which drops every
// connection, while the others answer, does not degrade the stage: no
// state change, no WARN line. The member's fetches from the partition
// that broker leads fail at each retry, and each lookup of its leader
// goes to the brokers that answer; sarama reports ErrOutOfBrokers (which
// degrades at once) only once every broker it knows failed. Nor does the
// partition's leader moving to a broker that answers, which the member
// follows to read a record produced then. The check that the stage stays
// running runs through the member's next 50 failed requests to that
// broker and the move.
func TestOneBrokerOutOfReachDoesNotDegradeTheStage(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const group = "one-broker-away"
		c := newCluster(t, 3)
		// The broker away leads partition 0 and is not the group's
		// coordinator: a coordinator away fails the session itself.
		coord := c.CoordinatorFor(group)
		away := (coord + 1) % 3
		if err := c.MoveTopicPartition(testTopic, 0, away); err != nil {
			t.Fatal(err)
		}
		produce(t, c, 3, 0, 6)
		book := newLogBook()
		l := newLedger()
		src := cl.new(t, sourceOptions(c, group))
		po := pipelineOpts(group, src, 1, l, nil)
		po.Logger = book.logger()
		p := startPipeline(t, po)
		t.Cleanup(func() { stopPipeline(t, p) })
		status := func() producer.StageStatus { return p.SourceStatus()[0] }
		wait.Within(t, 30*time.Second, "the records before the broker went away", func() bool {
			return l.covers(map[int32]int64{0: 2, 1: 2, 2: 2})
		})

		f := testbroker.Inject(c, kmsg.Key(-1), 0, func(kmsg.Request) bool { return c.CurrentNode() == away })
		f.Every(1)
		degraded := func() bool {
			return status().State == producer.StateDegraded || degradedLines(book) != ""
		}
		// The member stopped asking the broker away only if no request to
		// it was dropped for a long while: a stalled process asks less
		// often, not never.
		const silence = 30 * time.Second
		seen, since := f.Failed(), time.Now()
		for f.Failed() < 50 {
			if degraded() {
				t.Fatalf("status %+v after %d requests to broker %d dropped, want running: the other brokers answer", status(), f.Failed(), away)
			}
			if n := f.Failed(); n != seen {
				seen, since = n, time.Now()
			} else if time.Since(since) > silence {
				t.Fatalf("no request to broker %d dropped in %v after %d; the member stopped asking it", away, silence, n)
			}
			time.Sleep(10 * time.Millisecond) // a poll interval: checking that the stage stays running meanwhile
		}
		if err := c.MoveTopicPartition(testTopic, 0, coord); err != nil {
			t.Fatal(err)
		}
		produceThrough(t, c, coord, 0)
		wait.Within(t, 30*time.Second, "the record produced after the leader moved", func() bool { return l.handled(rec{0, 2}) })
		if degraded() {
			t.Fatalf("status %+v, log %q, want running with no degrade: the other brokers answer", status(), degradedLines(book))
		}
	})
}

// degradedLines is the text of the stage's degrade lines in book.
func degradedLines(book logBook) string {
	var out []string
	for _, r := range book.find(func(r logRecord) bool { return r.Msg == producer.DegradedLog }) {
		out = append(out, r.Text)
	}
	return strings.Join(out, "\n")
}

// produceThrough writes one record to partition part through broker node only
// (its leader), for a cluster whose other brokers may not answer.
func produceThrough(t testing.TB, c *kfake.Cluster, node, part int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()[node]), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: testTopic, Partition: part, Value: []byte("after the move")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
