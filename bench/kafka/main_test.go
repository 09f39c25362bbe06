package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	maybeServeCluster() // the child process serving the cluster exits here
	goleak.VerifyTestMain(m,
		// rcrowley/go-metrics (sarama's metric registry) starts one
		// process-wide meter ticker on first use and cannot stop it.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}

// Checks: on a small backlog both sides read every record (a side that
// misses one fails the run) and the report has one line per size with both
// rates, heaps and CPU costs per record, and the two sides' collections
// and page faults.
func TestSmallRunReportsBothSides(t *testing.T) {
	var out, progress bytes.Buffer
	res, err := run(config{Sizes: []int{3000}, Partitions: 3, RecordSize: 50, Rounds: 1, Timeout: time.Minute, Progress: &progress}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(res) != 1 || res[0].N != 3000 || res[0].PlainRate <= 0 || res[0].BlvRate <= 0 ||
		res[0].PlainCPU <= 0 || res[0].BlvCPU <= 0 || res[0].Ratio != res[0].BlvRate/res[0].PlainRate {
		t.Fatalf("unexpected results %+v", res)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], "3000") || !strings.Contains(lines[2], "%") || strings.Count(lines[2], " ns") != 3 ||
		!strings.HasSuffix(lines[1], "gc        faults") || strings.Count(lines[2], "/") != 3 {
		t.Fatalf("unexpected report:\n%s", out.String())
	}
	// One progress line per measured round, none for the warm-up, with
	// the round's own ratio.
	rounds := strings.Split(strings.TrimSpace(progress.String()), "\n")
	if len(rounds) != 1 || !strings.HasPrefix(rounds[0], "3000 records, round 1: plain ") || !strings.Contains(rounds[0], "| boulevard ") ||
		!strings.HasSuffix(rounds[0], fmt.Sprintf("| ratio %.1f%%", 100*res[0].Ratio)) {
		t.Fatalf("unexpected progress:\n%s", progress.String())
	}
	checkFetched(t, rounds[0], 3000*50)
}

var fetchedRE = regexp.MustCompile(`\((\d+) fetches, (\d+) batches, ([0-9.]+) MB\)`)

// checkFetched checks that a progress line says, for both sides, that the
// client fetched at least once, decoded record batches and received at
// least the backlog's bytes.
func checkFetched(t *testing.T, line string, backlog int) {
	t.Helper()
	sides := fetchedRE.FindAllStringSubmatch(line, -1)
	if len(sides) != 2 {
		t.Fatalf("progress line without both sides' fetches: %s", line)
	}
	for i, m := range sides {
		fetches, _ := strconv.Atoi(m[1])
		batches, _ := strconv.Atoi(m[2])
		mb, _ := strconv.ParseFloat(m[3], 64)
		if fetches < 1 || batches < 1 || mb*1e6 < float64(backlog)*0.99 {
			t.Errorf("side %d fetched %s, want a fetch, a batch and at least %d bytes: %s", i, m[0], backlog, line)
		}
	}
}

// Checks: the franz-go comparison reads every record on both sides too, and
// reports what each side fetched.
func TestSmallFranzRunReportsBothSides(t *testing.T) {
	var out, progress bytes.Buffer
	res, err := run(config{Sizes: []int{3000}, Partitions: 3, RecordSize: 50, Rounds: 1, Timeout: time.Minute, Client: "franz", Progress: &progress}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(res) != 1 || res[0].PlainRate <= 0 || res[0].BlvRate <= 0 || !strings.Contains(out.String(), "client franz") {
		t.Fatalf("unexpected results %+v\n%s", res, out.String())
	}
	checkFetched(t, progress.String(), 3000*50)
}

// Checks: with -plain-processors both clients' plain sides still count as
// many records as the backlog holds, through their processors (a run that
// counts fewer before the timeout fails), and the report says which shape
// the plain side had.
func TestSmallRunWithPlainProcessors(t *testing.T) {
	for _, client := range []string{"sarama", "franz"} {
		t.Run(client, func(t *testing.T) {
			var out bytes.Buffer
			res, err := run(config{Sizes: []int{3000}, Partitions: 3, RecordSize: 50, Rounds: 1, Timeout: time.Minute,
				Client: client, PlainProcessors: true, Processors: 2}, &out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if len(res) != 1 || res[0].PlainRate <= 0 || res[0].BlvRate <= 0 || !strings.Contains(out.String(), "plain processors true") {
				t.Fatalf("unexpected results %+v\n%s", res, out.String())
			}
		})
	}
}
