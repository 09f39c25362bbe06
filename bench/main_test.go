package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Checks: both pipelines acknowledge every message exactly once, with and
// without pre-allocated messages, including a last partial batch.
func TestBothPipelinesDeliverExactlyOnce(t *testing.T) {
	for _, prealloc := range []bool{false, true} {
		cfg := config{N: 10_007, Processors: 2, BatchSize: 100, Timeout: time.Second, Prealloc: prealloc}
		var ta tally
		for name, run := range map[string]runner{"boulevard": runBoulevard, "hand-written": runHand} {
			s, err := measure(name, run, cfg, &ta)
			if err != nil {
				t.Fatalf("%s (prealloc %v): %v", name, prealloc, err)
			}
			// 100 full batches and one of 7: one ack call per batch.
			if want := 101.0 / float64(cfg.N); s.AcksPer != want {
				t.Errorf("%s (prealloc %v): %.5f ack calls per message, want %.5f", name, prealloc, s.AcksPer, want)
			}
		}
	}
}

// Checks: the harness warms up, runs both sides and prints their comparison
// with the targets.
func TestCompareReports(t *testing.T) {
	var progress, out bytes.Buffer
	r, err := compare(config{N: 2_000, Processors: 2, BatchSize: 100, Timeout: time.Second}, 1, 500, &progress)
	if err != nil {
		t.Fatal(err)
	}
	r.print(&out)
	if len(r.Boulevard.Samples) != 1 || len(r.Hand.Samples) != 1 || r.Ratio() <= 0 {
		t.Fatalf("report = %+v", r)
	}
	for _, want := range []string{"boulevard", "hand-written", "ratio", "targets"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	t.Log("\n" + progress.String() + out.String())
}
