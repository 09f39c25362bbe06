package main

import (
	"bytes"
	"fmt"
	"slices"
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

// Checks: across the topic hop, with ack propagation disabled and auto, with
// and without pre-allocated messages and with a last partial batch, both
// sides acknowledge every message exactly once and handle every payload;
// Boulevard's messages really cross the topic (published and received N
// times); with auto every message is acknowledged upstream by its own call
// and never before the downstream batch handler handled it.
func TestTopicHopDeliversExactlyOnce(t *testing.T) {
	for _, mode := range []topicMode{topicDisabled, topicAuto} {
		for _, prealloc := range []bool{false, true} {
			cfg := config{N: 10_007, Processors: 2, BatchSize: 100, Timeout: time.Minute, Prealloc: prealloc, Topic: mode}
			blvd, hand := cfg.runners()
			var ta tally
			for name, run := range map[string]runner{"boulevard": blvd, "hand-written": hand} {
				what := fmt.Sprintf("%s (%s, prealloc %v)", name, mode, prealloc)
				s, err := measure(name, run, cfg, &ta)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if mode == topicAuto {
					if s.AcksPer != 1 || s.EarlyAcks != 0 {
						t.Errorf("%s: %.4f ack calls per message, %d early, want 1 and 0", what, s.AcksPer, s.EarlyAcks)
					}
				}
				if name != "boulevard" {
					continue
				}
				n := uint64(cfg.N)
				if s.Hop.Published != n || s.Hop.Received != n {
					t.Errorf("%s: topic published %d, source received %d, want %d each", what, s.Hop.Published, s.Hop.Received, n)
				}
				switch mode {
				case topicAuto:
					if s.Hop.Acked != n || s.Hop.Failed != 0 || s.Hop.NotTracked != 0 {
						t.Errorf("%s: sink acked %d, failed %d, %d not tracked; want %d, 0, 0", what, s.Hop.Acked, s.Hop.Failed, s.Hop.NotTracked, n)
					}
				case topicDisabled:
					if s.Hop.NotTracked != n || s.Hop.Acked != 0 {
						t.Errorf("%s: %d acks not tracked, sink acked %d; want %d untracked publishes", what, s.Hop.NotTracked, s.Hop.Acked, n)
					}
				}
			}
		}
	}
}

// Checks: the harness rejects a run whose acknowledgements run ahead of the
// batch handler, except with -topic disabled where that is the semantics.
func TestVerifyCatchesEarlyAcks(t *testing.T) {
	for _, mode := range []topicMode{topicNone, topicDisabled, topicAuto} {
		cfg := config{N: 2, Topic: mode}
		var ta tally
		ta.reset(cfg)
		ta.mu.Lock()
		ta.seen[0]++
		ta.acks(1) // acknowledged before anything was handled
		ta.mu.Unlock()
		ta.handled(transform(0)+transform(1), 2)
		ta.mu.Lock()
		ta.seen[1]++
		ta.acks(1)
		ta.mu.Unlock()
		err := ta.verify(cfg)
		if mode == topicDisabled {
			if err != nil {
				t.Errorf("%s: %v, want no error", mode, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), "before the batch handler") {
			t.Errorf("%s: %v, want the early acknowledgement reported", mode, err)
		}
	}
}

// Checks: -topic selects the workloads, and an unknown value is refused.
func TestParseTopicModes(t *testing.T) {
	for in, want := range map[string][]topicMode{
		"": {topicNone}, "none": {topicNone}, "disabled": {topicDisabled}, "auto": {topicAuto},
		"both": {topicDisabled, topicAuto},
	} {
		got, err := parseTopicModes(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseTopicModes(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseTopicModes("tracked"); err == nil {
		t.Error(`parseTopicModes("tracked") accepted`)
	}
}

// Checks: the harness runs the topic-hop comparison and prints its ack
// calls per message beside throughput and ratio.
func TestCompareReportsTopicHop(t *testing.T) {
	var progress, out bytes.Buffer
	r, err := compare(config{N: 2_000, Processors: 2, BatchSize: 100, Timeout: time.Second, Topic: topicAuto}, 1, 500, &progress)
	if err != nil {
		t.Fatal(err)
	}
	r.print(&out)
	if len(r.Boulevard.Samples) != 1 || len(r.Hand.Samples) != 1 || r.Ratio() <= 0 {
		t.Fatalf("report = %+v", r)
	}
	for _, want := range []string{"topic hop with ack_propagation auto", "ack calls per message", "ratio", "early ack calls"} {
		if !strings.Contains(out.String()+progress.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, progress.String()+out.String())
		}
	}
	t.Log("\n" + progress.String() + out.String())
}
