package main

import (
	"bytes"
	"runtime/trace"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	xtrace "golang.org/x/exp/trace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// at makes a trace time from milliseconds.
func at(msec int) xtrace.Time { return xtrace.Time(msec) * xtrace.Time(time.Millisecond) }

// The accounting: how long k goroutines ran at once, and each goroutine's
// time per state, its wakeups, its most frequent blocking site and its name.
func TestSummaryAccountsRunningAtOnceAndPerGoroutine(t *testing.T) {
	const (
		run  = xtrace.GoRunning
		rble = xtrace.GoRunnable
		wait = xtrace.GoWaiting
	)
	ts := []transition{
		// g1 was running when the trace started; g2 was waiting.
		{At: at(5), G: 2, From: wait, To: rble},
		{At: at(6), G: 2, From: rble, To: run},
		{At: at(10), G: 1, From: run, To: wait, Name: "main.source", Site: "a"},
		{At: at(12), G: 1, From: wait, To: rble},
		{At: at(13), G: 1, From: rble, To: run},
		{At: at(15), G: 2, From: run, To: wait, Name: "main.worker", Site: "b"},
		{At: at(16), G: 1, From: run, To: wait, Site: "a"},
		{At: at(17), G: 3, From: xtrace.GoNotExist, To: rble, Start: "main.helper"},
		{At: at(18), G: 3, From: rble, To: run},
		{At: at(19), G: 3, From: run, To: wait, Site: "c"},
		{At: at(30), G: 4, From: wait, To: rble}, // after the end: ignored
	}
	s := summarise(at(0), at(20), ts)

	if s.Duration != 20*time.Millisecond {
		t.Fatalf("duration %v, want 20ms", s.Duration)
	}
	// One running [0,6) [10,13) [15,16) [18,19) = 11ms; two [6,10) [13,15)
	// = 6ms; none [16,18) [19,20) = 3ms.
	want := []time.Duration{3 * time.Millisecond, 11 * time.Millisecond, 6 * time.Millisecond}
	if len(s.AtOnce) != len(want) {
		t.Fatalf("AtOnce %v, want %v", s.AtOnce, want)
	}
	for k := range want {
		if s.AtOnce[k] != want[k] {
			t.Errorf("%d running at once for %v, want %v", k, s.AtOnce[k], want[k])
		}
	}
	if m := s.Mean(); m < 1.149 || m > 1.151 {
		t.Errorf("mean %.3f running at once, want (11+2*6)/20 = 1.15", m)
	}

	byG := map[xtrace.GoID]goStats{}
	for _, g := range s.Goroutines {
		byG[g.G] = g
	}
	if _, ok := byG[4]; ok || len(s.Goroutines) != 3 {
		t.Fatalf("goroutines %+v, want g1, g2, g3 (g4 never ran)", s.Goroutines)
	}
	check := func(g xtrace.GoID, name string, running, runnable, waiting time.Duration, wakeups int, site string, blocks int) {
		t.Helper()
		got := byG[g]
		wantG := goStats{G: g, Name: name, Running: running, Runnable: runnable, Waiting: waiting, Wakeups: wakeups, Site: site, Blocks: blocks}
		if got != wantG {
			t.Errorf("g%d: got %+v\nwant %+v", g, got, wantG)
		}
	}
	milli := time.Millisecond
	check(1, "main.source", 13*milli, 1*milli, 6*milli, 1, "a", 2)
	check(2, "main.worker", 9*milli, 1*milli, 10*milli, 1, "b", 1)
	check(3, "main.helper", 1*milli, 1*milli, 1*milli, 0, "c", 1)
	// The longest-running first.
	if s.Goroutines[0].G != 1 || s.Goroutines[1].G != 2 || s.Goroutines[2].G != 3 {
		t.Errorf("order %d, %d, %d; want 1, 2, 3", s.Goroutines[0].G, s.Goroutines[1].G, s.Goroutines[2].G)
	}
}

// pingPong receives values until in is closed.
func pingPong(in <-chan int) {
	for range in {
	}
}

// A real trace: the goroutine that blocks on a channel is found, named by its
// function, with a wakeup per value sent and its blocking site.
func TestReadsAGoExecutionTrace(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	const n = 20
	synctest.Test(t, func(t *testing.T) {
		in := make(chan int)
		go pingPong(in)
		for i := range n {
			synctest.Wait() // pingPong is blocked receiving
			in <- i
		}
		synctest.Wait()
		close(in)
	})
	trace.Stop()

	start, end, ts, err := read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if end <= start || len(ts) == 0 {
		t.Fatalf("span %d..%d with %d transitions", start, end, len(ts))
	}
	s := summarise(start, end, ts)
	var found *goStats
	for i, g := range s.Goroutines {
		if strings.HasSuffix(g.Name, "pingPong") {
			found = &s.Goroutines[i]
		}
	}
	if found == nil {
		var out bytes.Buffer
		s.print(&out, 20)
		t.Fatalf("no goroutine named …pingPong in\n%s", out.String())
	}
	// It blocks once per value and once more for the close.
	if found.Wakeups != n+1 || found.Blocks != n+1 {
		t.Errorf("pingPong woken %d times, blocked %d times; want %d of each", found.Wakeups, found.Blocks, n+1)
	}
	if !strings.Contains(found.Site, "pingPong (main_test.go:") {
		t.Errorf("pingPong blocks most at %q, want its receive in main_test.go", found.Site)
	}
	if s.Mean() <= 0 || len(s.AtOnce) < 2 {
		t.Errorf("running at once %v (mean %.2f): the test's own goroutines ran", s.AtOnce, s.Mean())
	}
}
