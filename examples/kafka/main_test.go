package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/examples/internal/exampletest"
	"github.com/boulevard-go/boulevard/examples/internal/monitor"
	"github.com/boulevard-go/boulevard/internal/testnet"
)

// Every test must leave no goroutine of the pipeline, sarama or the cluster
// behind. A test binary started by exampletest.Start runs main instead.
func TestMain(m *testing.M) {
	exampletest.RunMain(main)
	goleak.VerifyTestMain(m,
		// rcrowley/go-metrics (sarama's metric registry) starts one
		// process-wide meter ticker on first use and offers no way to stop
		// it.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}

var (
	sensorLine  = regexp.MustCompile(`(?m)^(sensor-\d+)\s+(\d+) readings, mean (-?[\d.]+) °C$`)
	handledLine = regexp.MustCompile(`(?m)^handled (\d+) records \((\d+) malformed, committed past\)`)
)

// expected computes, from the rule produce follows, how many well-formed
// readings each sensor gets out of n, their mean, and how many are
// malformed.
func expected(n int) (count map[string]int, mean map[string]float64, malformed int) {
	count, mean = map[string]int{}, map[string]float64{}
	sum := map[string]float64{}
	for i := range n {
		s := fmt.Sprintf("sensor-%d", i%7)
		if i%500 == 499 {
			malformed++
			continue
		}
		count[s]++
		sum[s] += 15 + float64(i%100)/10
	}
	for s, c := range count {
		mean[s] = sum[s] / float64(c)
	}
	return count, mean, malformed
}

// checkReport checks run's report against what n produced readings must
// give: every record handled once, the malformed ones failed (and committed
// past), every well-formed one batched under its sensor with the right mean.
func checkReport(t *testing.T, out string, n int) {
	t.Helper()
	count, mean, malformed := expected(n)
	m := handledLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no totals line in the report:\n%s", out)
	}
	if h, _ := strconv.Atoi(m[1]); h != n {
		t.Errorf("handled %d records, want %d:\n%s", h, n, out)
	}
	if f, _ := strconv.Atoi(m[2]); f != malformed {
		t.Errorf("%d malformed, want %d:\n%s", f, malformed, out)
	}
	lines := sensorLine.FindAllStringSubmatch(out, -1)
	if len(lines) != len(count) {
		t.Fatalf("%d sensor lines, want %d:\n%s", len(lines), len(count), out)
	}
	for _, l := range lines {
		c, _ := strconv.Atoi(l[2])
		mu, _ := strconv.ParseFloat(l[3], 64)
		if c != count[l[1]] {
			t.Errorf("%s: %d readings, want %d", l[1], c, count[l[1]])
		}
		if d := mu - mean[l[1]]; d > 0.006 || d < -0.006 {
			t.Errorf("%s: mean %.2f, want %.2f", l[1], mu, mean[l[1]])
		}
	}
}

// The default run (in-process cluster, seeded by the program) handles every
// reading exactly once: malformed ones fail and are counted, the others are
// averaged per sensor.
func TestInProcessClusterRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	const n = 3000
	cfg := config{topic: "readings", group: "example-test", n: n, partitions: 4, members: 2, produce: true,
		strategy: "cooperative-sticky"}
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "in-process Kafka cluster on 127.0.0.1:") {
		t.Errorf("the report does not say it started the in-process cluster on loopback:\n%s", out.String())
	}
	checkReport(t, out.String(), n)
}

var partitionLine = regexp.MustCompile(`(?m)^  (readings/\d+): committed (-?\d+), high water (\d+), lag (\d+), in flight (\d+)$`)

// With -v the program prints the source's stats: the member, and every
// partition once with its high-water mark (the readings it holds, all
// produced by the run). One member, so that no rebalance can be under way
// when the stats are printed.
func TestVerboseRunPrintsSourceStats(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	const n = 1000
	cfg := config{topic: "readings", group: "example-stats", n: n, partitions: 4, members: 1, produce: true,
		strategy: "cooperative-sticky", sourceStats: true}
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if got := strings.Count(out.String(), "\nmember "); got != 1 {
		t.Errorf("%d member lines, want 1:\n%s", got, out.String())
	}
	seen := map[string]bool{}
	var hw int64
	for _, m := range partitionLine.FindAllStringSubmatch(out.String(), -1) {
		if seen[m[1]] {
			t.Errorf("partition %s printed twice:\n%s", m[1], out.String())
		}
		seen[m[1]] = true
		h, _ := strconv.ParseInt(m[3], 10, 64)
		hw += h
	}
	if len(seen) != 4 || hw != n {
		t.Fatalf("%d partitions with high-water marks summing to %d, want 4 and %d:\n%s", len(seen), hw, n, out.String())
	}
}

// With -brokers the program uses the given cluster; once it returns, the
// drain has committed the group's offsets up to the end of every partition,
// so a restart would not read the records again.
func TestGivenBrokersCommitEverything(t *testing.T) {
	const (
		n     = 2000
		parts = 3
		topic = "readings"
		group = "example-brokers"
	)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(parts, topic),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	cfg := config{brokers: strings.Join(cluster.ListenAddrs(), ","), topic: topic, group: group, n: n,
		partitions: parts, members: 1, produce: true, strategy: "range"}
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "in-process Kafka cluster") {
		t.Errorf("the program started its own cluster although brokers were given:\n%s", out.String())
	}
	checkReport(t, out.String(), n)
	gi := cluster.GroupInfo(group)
	if gi == nil {
		t.Fatal("the group is unknown to the cluster")
	}
	var total int64
	for p := range int32(parts) {
		c, ok := gi.Commits[topic][p]
		if !ok {
			t.Fatalf("partition %d has no committed offset", p)
		}
		total += c.Offset
	}
	if total != n {
		t.Errorf("committed offsets add up to %d, want every one of the %d records", total, n)
	}
}

// A -partitions the in-process cluster cannot honour (0 or less, which it
// would replace by its default, or past the bound: beyond int32 it wraps,
// and a huge count takes memory without limit) is refused at once, naming
// the flag.
func TestPartitionsOutOfRangeFailFast(t *testing.T) {
	for _, partitions := range []int{0, -1, maxPartitions + 1, math.MaxInt} {
		ctx, cancel := context.WithCancel(context.Background())
		cfg := config{topic: "readings", group: "example-parts", n: 1, partitions: partitions, members: 1, produce: true,
			strategy: "cooperative-sticky"}
		done := make(chan error, 1)
		go func() { done <- run(ctx, cfg, &bytes.Buffer{}) }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "-partitions") {
				t.Errorf("partitions %d: run returned %v, want an error naming -partitions", partitions, err)
			}
		case <-time.After(15 * time.Second):
			cancel()
			<-done
			t.Errorf("partitions %d: run still going after 15s", partitions)
		}
		cancel()
	}
}

// A negative -n is refused at once (0 means until interrupted; a negative
// count used to wait forever as well, for records never produced).
func TestNegativeNFailsFast(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := config{topic: "readings", group: "example-neg", n: -1, partitions: 1, members: 1, produce: true,
		strategy: "cooperative-sticky"}
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, &bytes.Buffer{}) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "-n") {
			t.Fatalf("run returned %v, want an error naming -n", err)
		}
	case <-time.After(15 * time.Second):
		cancel()
		<-done
		t.Fatal("run still waiting after 15s")
	}
}

// Guarantee: flags the program cannot run with are refused at once with an
// error naming the flag, before anything connects or starts.
func TestFlagsOutOfRangeNameTheFlag(t *testing.T) {
	valid := config{topic: "readings", group: "example-flags", n: 1, partitions: 1, members: 1, produce: true,
		strategy: "cooperative-sticky"}
	for _, tc := range []struct {
		flag string
		set  func(*config)
	}{
		{"-members", func(c *config) { c.members = 0 }},
		{"-members", func(c *config) { c.members = -1 }},
		{"-members", func(c *config) { c.members = maxMembers + 1 }},
		{"-n", func(c *config) { c.n = maxRecords + 1 }},
		{"-topic", func(c *config) { c.topic = "" }},
		{"-group", func(c *config) { c.group = " " }},
		{"-rebalance", func(c *config) { c.strategy = "bogus" }},
	} {
		cfg := valid
		tc.set(&cfg)
		// A cancelled context: a run that is not refused stops at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := run(ctx, cfg, io.Discard); err == nil || !strings.HasPrefix(err.Error(), tc.flag+" ") {
			t.Errorf("%+v: run = %v, want an error naming %s", cfg, err, tc.flag)
		}
	}
}

// Guarantee: a broker given with user information ("user:password@host",
// "kafka://user:password@host:9092") is refused at once with an error
// naming -brokers that does not repeat the password.
func TestBrokersWithUserInformationAreRefusedWithoutShowingThem(t *testing.T) {
	const secret = "s3cr3t-XYZ"
	for _, brokers := range []string{"user:" + secret + "@127.0.0.1:1", "127.0.0.1:1, kafka://user:" + secret + "@broker:9092", "user:" + secret + "@broker"} {
		cfg := config{brokers: brokers, topic: "readings", group: "example-userinfo", n: 1, partitions: 1, members: 1,
			produce: true, strategy: "cooperative-sticky"}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // a run that is not refused stops at once
		err := run(ctx, cfg, io.Discard)
		if err == nil || !strings.HasPrefix(err.Error(), "-brokers ") {
			t.Errorf("-brokers %q: run = %v, want an error naming -brokers", brokers, err)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("-brokers %q: the error shows the password: %v", brokers, err)
		}
	}
}

// Guarantee: given brokers that accept connections but never answer, the
// program fails with an error saying it cannot connect within seconds
// (each network wait of the producer is bounded by produceTimeout), instead
// of waiting for sarama's 30s per attempt over several attempts.
func TestSilentBrokerFailsWithinSeconds(t *testing.T) {
	cfg := config{brokers: testnet.SilentListener(t), topic: "readings", group: "example-silent", n: 10,
		partitions: 1, members: 1, produce: true, strategy: "cooperative-sticky"}
	done := make(chan error, 1)
	go func() { done <- run(context.Background(), cfg, io.Discard) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "cannot connect") {
			t.Fatalf("run = %v, want an error saying it cannot connect", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("run still waiting for the silent broker after a minute")
	}
}

// Guarantee: consuming from brokers that accept connections but never
// answer, the program says that the source is failing as soon as a
// connection check has failed, before producer.Restart gives up (its logs
// only show with -v).
func TestFailingSourceReportedBeforeTheRunGivesUp(t *testing.T) {
	cfg := config{brokers: testnet.SilentListener(t), topic: "readings", group: "example-silent", n: 10,
		partitions: 1, members: 1, produce: false, strategy: "cooperative-sticky"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out monitor.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, &out) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(out.String(), "the source is failing, retrying: kafka: cannot connect") {
		select {
		case err := <-done:
			t.Fatalf("run returned %v without saying the source was failing:\n%s", err, out.String())
		case <-tick.C:
		}
	}
	cancel()
	<-done
}

// Guarantee: Ctrl-C and SIGTERM both stop the program the graceful way,
// whether it is producing (it stops producing, says how far it got and
// consumes nothing) or consuming (the pipeline drains and the report says
// how many records were left), and it exits 0.
func TestSignalsStopAndReport(t *testing.T) {
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		for _, tc := range []struct {
			phase string
			args  []string
			want  string
		}{
			// Producing the largest -n takes far longer than the test waits.
			{"producing", []string{"-n", strconv.Itoa(maxRecords)}, "interrupted while producing: produced "},
			// Waiting for records nobody produces never ends by itself.
			{"consuming", []string{"-n", "5", "-produce=false"}, "interrupted: 5 of 5 records not handled"},
		} {
			t.Run(sig.String()+"/"+tc.phase, func(t *testing.T) {
				p := exampletest.Start(t, tc.args...)
				p.WaitOutput("in-process Kafka cluster on ", time.Minute)
				p.Signal(sig)
				if code := p.Wait(time.Minute); code != 0 {
					t.Fatalf("exit status %d, want 0\nstderr:\n%s", code, p.Stderr())
				}
				if !strings.Contains(p.Stdout(), tc.want) {
					t.Fatalf("output lacks %q:\n%s", tc.want, p.Stdout())
				}
			})
		}
	}
}
