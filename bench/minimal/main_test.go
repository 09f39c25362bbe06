package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
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

// Checks: -window and -demand reach Boulevard's pipeline (its permit
// window and its processors' chunk size) in the compared workloads and the
// latency workload, and a run with a small window and chunk still handles
// every message once.
func TestBoulevardSettingsReachThePipeline(t *testing.T) {
	const n = 3_001
	recs := makeRecords(n)
	var ta tally
	cfg := config{N: n, Processors: 2, BatchSize: 100, Window: 7, Demand: 3}
	p, err := pipeline.New(blvdOptions(cfg, recs, &ta))
	if err != nil {
		t.Fatal(err)
	}
	top := p.Topology()
	if top.Producer.Flow.Initial != 7 || top.Processors.MaxDemand != 3 {
		t.Errorf("window %d, max demand %d; want 7 and 3", top.Producer.Flow.Initial, top.Processors.MaxDemand)
	}
	if _, err := measure("boulevard", runBoulevard, cfg, recs, &ta); err != nil {
		t.Fatal(err)
	}
	lc := latencyConfig{Rate: 1_000, Duration: time.Second, Processors: 2, BatchSize: 100, Timeout: 10 * time.Millisecond, Demand: 3, Window: 7}
	lp, err := pipeline.New(latencyOptions(lc, &latencies{}))
	if err != nil {
		t.Fatal(err)
	}
	if lt := lp.Topology(); lt.Producer.Flow.Initial != 7 || lt.Processors.MaxDemand != 3 {
		t.Errorf("latency workload: window %d, max demand %d; want 7 and 3", lt.Producer.Flow.Initial, lt.Processors.MaxDemand)
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

// Checks: with a trace prefix, each side writes one execution trace (of its
// last round), named after the workload and the side, and nothing else is
// traced (not the warm-up).
func TestTraceWritesOneFilePerSide(t *testing.T) {
	recs := makeRecords(2_000)
	prefix := filepath.Join(t.TempDir(), "run")
	if _, err := runPair("procs", config{N: 2_000, Processors: 2, Trace: prefix}, recs, 3, 500, nil); err != nil {
		t.Fatal(err)
	}
	for _, side := range []string{"boulevard", "hand"} {
		b, err := os.ReadFile(prefix + "-procs-" + side + ".trace")
		if err != nil {
			t.Fatal(err)
		}
		// An execution trace starts with its header, "go 1.NN trace".
		if !bytes.HasPrefix(b, []byte("go 1.")) || !bytes.Contains(b[:16], []byte(" trace")) {
			t.Errorf("%s: not an execution trace: %q", side, b[:min(len(b), 16)])
		}
	}
	entries, err := os.ReadDir(filepath.Dir(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("%d trace files, want one per side", len(entries))
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

// Checks: every message type of the msgsize workload carries every
// message exactly once, and each has the size its name gives; the mirror
// of Boulevard's message keeps Boulevard's size when the message changes.
func TestMessageSizes(t *testing.T) {
	const n = 10_007
	recs := makeRecords(n)
	var ta tally
	for _, s := range sizes {
		if _, err := measure("hand", s.run, config{N: n, Processors: 2}, recs, &ta); err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
	}
	if got := unsafe.Sizeof(msg{}); got != 32 {
		t.Errorf("msg is %d bytes, want 32", got)
	}
	if got := unsafe.Sizeof(msg64{}); got != 64 {
		t.Errorf("msg64 is %d bytes, want 64", got)
	}
	if got, want := unsafe.Sizeof(msgLikeBoulevard{}), unsafe.Sizeof(message.Message[[]byte]{}); got != want {
		t.Errorf("msgLikeBoulevard is %d bytes, message.Message[[]byte] %d", got, want)
	}
}

// Checks: the msgsize workload reports every message type.
func TestMsgSizesReports(t *testing.T) {
	var out bytes.Buffer
	if err := msgSizes(config{N: 2_000, Processors: 2}, makeRecords(2_000), 2, 500, &out); err != nil {
		t.Fatal(err)
	}
	for _, s := range sizes {
		if !strings.Contains(out.String(), "message "+s.name+":") {
			t.Errorf("no line for %s in:\n%s", s.name, out.String())
		}
	}
}
