package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Checks: in every workload (batches of 100 with a last partial batch,
// processors only, batches of 1, more processors) both sides handle every
// message exactly once.
func TestBothSidesHandleEveryMessageOnce(t *testing.T) {
	const n = 10_007
	recs := makeRecords(n)
	var ta tally
	for _, cfg := range []config{
		{N: n, Processors: 2, BatchSize: 100},
		{N: n, Processors: 2},
		{N: n, Processors: 2, BatchSize: 1},
		{N: n, Processors: 8, BatchSize: 100},
	} {
		for side, run := range map[string]runner{"boulevard": runBoulevard, "hand": runHand} {
			s, err := measure(side, run, cfg, recs, &ta)
			if err != nil {
				t.Fatalf("%+v: %v", cfg, err)
			}
			if s.MsgsPerSec <= 0 {
				t.Errorf("%s %+v: throughput %v", side, cfg, s.MsgsPerSec)
			}
		}
	}
}

// Checks: a failing check reaches the tally on both sides, so a run whose
// work went wrong cannot pass for a fast one.
func TestBadRecordFailsTheRun(t *testing.T) {
	recs := makeRecords(1_000)
	recs[500] = make([]byte, recordSize) // both halves 0: check refuses it
	var ta tally
	for side, run := range map[string]runner{"boulevard": runBoulevard, "hand": runHand} {
		if _, err := measure(side, run, config{N: 1_000, Processors: 2, BatchSize: 100}, recs, &ta); err == nil {
			t.Errorf("%s: a bad record went unnoticed", side)
		}
	}
}

// Checks: the paired rounds report a ratio per round and print the
// workload's summary.
func TestRunPairReports(t *testing.T) {
	recs := makeRecords(5_000)
	var progress, out bytes.Buffer
	p, err := runPair("batch", config{N: 5_000, Processors: 2, BatchSize: 100}, recs, 2, 1_000, &progress)
	if err != nil {
		t.Fatal(err)
	}
	p.print(&out)
	if len(p.RoundRatios) != 2 || p.Ratio() <= 0 || !strings.Contains(out.String(), "ratio median") {
		t.Fatalf("pair %+v, output:\n%s", p, out.String())
	}
}

// Checks: at an offered rate, every message of both sides reaches the
// batch handler and the quantiles are measured.
func TestLatencyRunsBothSides(t *testing.T) {
	c := latencyConfig{Rate: 20_000, Duration: 100 * time.Millisecond, Processors: 2, BatchSize: 100, Timeout: 10 * time.Millisecond}
	for _, side := range []string{"boulevard", "hand"} {
		r, err := runLatency(side, c)
		if err != nil {
			t.Fatal(err)
		}
		if r.p50 <= 0 || r.p99 < r.p50 {
			t.Errorf("%s: p50 %s p99 %s", side, r.p50, r.p99)
		}
	}
}
