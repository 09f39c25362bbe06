package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"
)

// Every test must leave no goroutine of the pipeline, sarama or the cluster
// behind.
func TestMain(m *testing.M) {
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
