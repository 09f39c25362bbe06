// Command schedtrace summarises how the goroutines of a Go execution trace
// shared the processors (Ps): for how long 0, 1, 2, … goroutines were
// running at once, and for each goroutine how long it ran, waited to run
// (runnable) and waited for something (blocked), how often it was woken,
// and where it most often blocked.
//
// A pipeline whose goroutines hand work to each other can end up running
// them one after another on a single P while the other Ps stay idle: each
// goroutine wakes the next and blocks before an idle P has picked the woken
// one up. A CPU profile does not show that (the idle Ps spin looking for
// work, so the process still uses its cores), but the share of time with
// one goroutine running at once does.
//
// Usage (from the bench directory):
//
//	go run ./minimal -workload procs -rounds 3 -trace /tmp/procs
//	go run ./schedtrace /tmp/procs-procs-boulevard.trace /tmp/procs-procs-hand.trace
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// transition is one goroutine state change, in trace order.
type transition struct {
	At       trace.Time
	G        trace.GoID
	From, To trace.GoState
	// Name names the goroutine by the outermost frame of interest of the
	// stack it blocks with (set when To == GoWaiting), and Start by the
	// function it starts in (set when it is created). A goroutine is named
	// by its first Name, or else by its Start.
	Name, Start string
	// Site is where a goroutine that blocks (To == GoWaiting) blocked: the
	// innermost frame outside the runtime and the standard library's
	// synchronisation (empty otherwise).
	Site string
}

// goStats is what one goroutine did during the trace.
type goStats struct {
	G                          trace.GoID
	Name                       string
	Running, Runnable, Waiting time.Duration
	// Wakeups counts the goroutine's transitions from waiting to runnable.
	Wakeups int
	// Site is where it blocked most often, and Blocks how often it did.
	Site   string
	Blocks int
}

// summary is the result of summarise.
type summary struct {
	Duration time.Duration
	// AtOnce[k] is how long exactly k goroutines were running at once.
	AtOnce []time.Duration
	// Goroutines is every goroutine that ran, the longest-running first.
	Goroutines []goStats
}

// Mean is the average number of goroutines running at once.
func (s summary) Mean() float64 {
	if s.Duration <= 0 {
		return 0
	}
	var sum float64
	for k, d := range s.AtOnce {
		sum += float64(k) * float64(d)
	}
	return sum / float64(s.Duration)
}

// summarise accounts the transitions (in time order) between start and end.
// A goroutine's state before its first transition is that transition's From
// state, counted from start.
func summarise(start, end trace.Time, ts []transition) summary {
	type gs struct {
		goStats
		state trace.GoState
		since trace.Time
		start string
		sites map[string]int
	}
	gor := map[trace.GoID]*gs{}
	running := 0
	// A goroutine's state at start is the From of its first transition in
	// the span (a real trace states every goroutine's status at its start).
	for _, t := range ts {
		if t.At < start || t.At > end || gor[t.G] != nil {
			continue
		}
		gor[t.G] = &gs{goStats: goStats{G: t.G}, state: t.From, since: start, sites: map[string]int{}}
		if t.From == trace.GoRunning {
			running++
		}
	}
	var atOnce []time.Duration
	last := start
	add := func(k int, d time.Duration) {
		for len(atOnce) <= k {
			atOnce = append(atOnce, 0)
		}
		atOnce[k] += d
	}
	account := func(g *gs, until trace.Time) {
		d := until.Sub(g.since)
		switch g.state {
		case trace.GoRunning:
			g.Running += d
		case trace.GoRunnable:
			g.Runnable += d
		case trace.GoWaiting:
			g.Waiting += d
		}
		g.since = until
	}
	for _, t := range ts {
		if t.At < start || t.At > end {
			continue
		}
		add(running, t.At.Sub(last))
		last = t.At
		g := gor[t.G]
		account(g, t.At)
		g.Name = cmp.Or(g.Name, t.Name)
		g.start = cmp.Or(g.start, t.Start)
		if t.From == trace.GoWaiting && t.To == trace.GoRunnable {
			g.Wakeups++
		}
		if t.To == trace.GoWaiting && t.Site != "" {
			g.sites[t.Site]++
		}
		if g.state == trace.GoRunning {
			running--
		}
		if t.To == trace.GoRunning {
			running++
		}
		g.state = t.To
	}
	add(running, end.Sub(last))
	s := summary{Duration: end.Sub(start), AtOnce: atOnce}
	for _, g := range gor {
		account(g, end)
		g.Name = cmp.Or(g.Name, g.start)
		if g.Running == 0 {
			continue
		}
		for site, n := range g.sites {
			if n > g.Blocks || n == g.Blocks && site < g.Site {
				g.Site, g.Blocks = site, n
			}
		}
		s.Goroutines = append(s.Goroutines, g.goStats)
	}
	slices.SortFunc(s.Goroutines, func(a, b goStats) int {
		return cmp.Or(cmp.Compare(b.Running, a.Running), cmp.Compare(a.G, b.G))
	})
	return s
}

// plumbing reports whether a frame belongs to the runtime, to the standard
// library's synchronisation, or to a helper that only starts goroutines, so
// that it neither names a goroutine nor is a blocking site.
func plumbing(fn string) bool {
	for _, p := range []string{"runtime.", "internal/", "sync.", "context.", "time.", "github.com/boulevard-go/boulevard/internal/group."} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// short drops a function name's package path, keeping its package.
func short(fn string) string {
	if i := strings.LastIndexByte(fn, '/'); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

// names reads a stack, whose frames run from the innermost to the
// outermost: the goroutine's name (its outermost frame that is not plumbing,
// or else its outermost frame) and its site (the innermost frame that is not
// plumbing, with its file and line).
func names(st trace.Stack) (name, site string) {
	var root string
	for f := range st.Frames() {
		root = f.Func
		if plumbing(f.Func) {
			continue
		}
		if site == "" {
			site = fmt.Sprintf("%s (%s:%d)", short(f.Func), path.Base(f.File), f.Line)
		}
		name = f.Func
	}
	return short(cmp.Or(name, root)), site
}

// read parses a trace into its goroutine transitions and its time span.
func read(r io.Reader) (start, end trace.Time, ts []transition, err error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return 0, 0, nil, err
	}
	first := true
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, 0, nil, err
		}
		if first {
			start, first = ev.Time(), false
		}
		end = ev.Time()
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		from, to := st.Goroutine()
		t := transition{At: ev.Time(), G: st.Resource.Goroutine(), From: from, To: to}
		switch {
		case from == trace.GoNotExist:
			// Creation: st.Stack is where the new goroutine starts.
			t.Start, _ = names(st.Stack)
		case to == trace.GoWaiting:
			// The goroutine blocks: the event's stack is its own.
			t.Name, t.Site = names(ev.Stack())
		}
		ts = append(ts, t)
	}
	return start, end, ts, nil
}

func pct(d, of time.Duration) float64 {
	if of <= 0 {
		return 0
	}
	return 100 * float64(d) / float64(of)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/1e6) }

// print writes s; top bounds the goroutines listed.
func (s summary) print(w io.Writer, top int) {
	fmt.Fprintf(w, "%s; goroutines running at once:", ms(s.Duration))
	for k, d := range s.AtOnce {
		fmt.Fprintf(w, " %d: %.1f%%", k, pct(d, s.Duration))
	}
	fmt.Fprintf(w, "; mean %.2f\n", s.Mean())
	fmt.Fprintf(w, "  %-56s %9s %9s %9s %8s  %s\n", "goroutine", "running", "runnable", "blocked", "wakeups", "blocks most at")
	for i, g := range s.Goroutines {
		if i == top {
			fmt.Fprintf(w, "  … %d more\n", len(s.Goroutines)-top)
			break
		}
		name := fmt.Sprintf("%s (g%d)", g.Name, g.G)
		if len(name) > 56 {
			name = "…" + name[len(name)-55:]
		}
		site := "-"
		if g.Blocks > 0 {
			site = fmt.Sprintf("%s (%d times)", g.Site, g.Blocks)
		}
		fmt.Fprintf(w, "  %-56s %9s %9s %9s %8d  %s\n", name, ms(g.Running), ms(g.Runnable), ms(g.Waiting), g.Wakeups, site)
	}
}

func main() {
	top := flag.Int("top", 10, "goroutines listed per trace, the longest-running first")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: schedtrace [-top n] trace-file...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "schedtrace:", err)
			os.Exit(1)
		}
		start, end, ts, err := read(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "schedtrace: %s: %v\n", path, err)
			os.Exit(1)
		}
		fmt.Printf("%s: ", path)
		summarise(start, end, ts).print(os.Stdout, *top)
	}
}
