package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/examples/internal/monitor"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// coordConfig is the coordinator's configuration.
type coordConfig struct {
	backend string // kafka or pulsar
	brokers string // a real Kafka, else in process
	url     string // a real Pulsar, else in process
	orders  int
	kill    bool
	verbose bool
	exe     string // the program children run
	log     *slog.Logger
	// http, "host:port", makes each process serve its metrics and
	// dashboard on port, port+1, ... in the order they start; linger keeps
	// them running after the report (monitor.Forever: until ctx ends).
	http   string
	linger monitor.Linger
}

// report is what the processes handled.
type report struct {
	enriched map[int]int    // order → times enriched (≥ 1; > 1 after the kill)
	archived map[int]bool   // orders archive handled
	checked  map[int]string // order → fraud's verdict
	per      map[string]int // process → orders handled
	killed   string         // the process killed with SIGKILL ("" with -kill=false)
	exits    map[string]error
}

// event is one line a child printed.
type event struct {
	role, line string
}

// child is one running process.
type child struct {
	role   string
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan struct{} // closed when its output is read and it has exited
	err    error
}

// maxOrders is the largest -orders: every process prints a line per order
// it handles, and the whole run has two minutes.
const maxOrders = 10_000

// childStopTimeout bounds how long a process may drain after SIGTERM before
// it is killed.
const childStopTimeout = 30 * time.Second

// replacement is the enrich process started in place of the one killed.
const replacement = "enrich-3"

// coordinate runs the processes, kills and replaces one enrich process
// when -kill is set, waits until every order was enriched and archive and
// fraud have handled every one, stops the processes and prints a report
// to out.
func coordinate(ctx context.Context, out io.Writer, c coordConfig) (*report, error) {
	if c.orders < 0 || c.orders > maxOrders {
		return nil, fmt.Errorf("-orders must be 0 to %d, got %d", maxOrders, c.orders)
	}
	addr, stop, err := brokerAddr(ctx, out, c)
	if err != nil {
		return nil, err
	}
	defer stop()
	events := make(chan event, 256)
	quit := make(chan struct{}) // closed when nobody reads events any more
	var wg sync.WaitGroup
	children := map[string]*child{}
	started := 0
	rep := &report{enriched: map[int]int{}, archived: map[int]bool{}, checked: map[int]string{},
		per: map[string]int{}, exits: map[string]error{}}
	start := func(role string) error {
		httpAddr, err := nthAddr(c.http, started)
		if err != nil {
			return err
		}
		started++
		ch, err := spawn(ctx, c, addr, httpAddr, role, events, quit, &wg)
		if err != nil {
			return err
		}
		children[role] = ch
		if role == replacement {
			rep.per[role] = 0 // listed in the report, even if no order comes to it
		}
		return nil
	}
	defer func() {
		// Stop every process still running: SIGTERM lets it drain; those
		// not gone within the bound are killed.
		close(quit)
		for _, ch := range children {
			_ = ch.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, ch := range children {
			select {
			case <-ch.done:
			case <-time.After(childStopTimeout):
				_ = ch.cmd.Process.Kill()
				<-ch.done
			}
		}
		wg.Wait()
	}()

	ready := map[string]bool{}
	waitReady := func(roles ...string) error {
		for _, r := range roles {
			if err := start(r); err != nil {
				return err
			}
		}
		for {
			all := true
			for _, r := range roles {
				all = all && ready[r]
			}
			if all {
				return nil
			}
			if err := next(ctx, out, events, children, rep, ready); err != nil {
				return err
			}
		}
	}
	// Consumers first: a new consumer group starts at the end of the log.
	if err := waitReady("archive", "fraud", "enrich-1", "enrich-2"); err != nil {
		return nil, err
	}
	if err := waitReady("ingest"); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "processes: archive, fraud, enrich-1, enrich-2, ingest (%d orders)\n", c.orders)
	// Done when every order was enriched (a member killed after publishing
	// an order into audit but before reporting it hands it to another
	// member, which reports it) and archive and fraud handled every one.
	for len(rep.enriched) < c.orders || len(rep.archived) < c.orders || len(rep.checked) < c.orders {
		if c.kill && rep.killed == "" && rep.per["enrich-1"] >= c.orders/8+1 {
			rep.killed = "enrich-1"
			_ = children["enrich-1"].cmd.Process.Kill() // SIGKILL: no drain, no commit
			fmt.Fprintf(out, "killed enrich-1 (SIGKILL) after it handled %d orders; starting %s\n", rep.per["enrich-1"], replacement)
			if err := start(replacement); err != nil {
				return nil, err
			}
		}
		if err := next(ctx, out, events, children, rep, ready); err != nil {
			return nil, fmt.Errorf("%w (%d of %d orders enriched, %d archived, %d checked by fraud)",
				err, len(rep.enriched), c.orders, len(rep.archived), len(rep.checked))
		}
	}
	printReport(out, c, rep)
	if c.linger != 0 {
		wait := time.Duration(c.linger)
		if c.linger == monitor.Forever {
			fmt.Fprintln(out, "the processes keep running and serving until interrupted")
			<-ctx.Done()
		} else {
			fmt.Fprintf(out, "the processes keep running and serving for %s\n", wait)
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
	return rep, nil
}

// nthAddr returns base's host with its port plus n (port 0: every process
// gets a port of the system's choosing), or "" when base is "".
func nthAddr(base string, n int) (string, error) {
	if base == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(base)
	if err != nil {
		return "", fmt.Errorf("-http %q: %w", base, err)
	}
	if port == "0" {
		return base, nil
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p+n > 65535 {
		return "", fmt.Errorf("-http %q: the processes need ports %s to %d", base, port, p+n)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+n)), nil
}

// next takes one event and records it. A process that exits with an error
// before the run is done fails the run, unless it is the killed one.
func next(ctx context.Context, out io.Writer, events <-chan event, children map[string]*child, rep *report, ready map[string]bool) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("waiting for the processes: %w", ctx.Err())
	case ev, ok := <-events:
		if !ok {
			return errors.New("every process exited")
		}
		record(ev, rep, ready, out)
		if ev.line == "" { // the process exited
			ch := children[ev.role]
			<-ch.done
			rep.exits[ev.role] = ch.err
			if ch.err != nil && ev.role != rep.killed {
				return fmt.Errorf("%s exited: %w: %s", ev.role, ch.err, strings.TrimSpace(ch.stderr.String()))
			}
		}
	}
	return nil
}

// record reads one line: "ready <role>" or "<role> handled order <id> ...".
func record(ev event, rep *report, ready map[string]bool, out io.Writer) {
	f := strings.Fields(ev.line)
	switch {
	case strings.HasPrefix(ev.line, "metrics on "):
		fmt.Fprintf(out, "%s: %s\n", ev.role, ev.line)
	case len(f) == 2 && f[0] == "ready":
		ready[f[1]] = true
	case len(f) >= 4 && f[1] == "handled" && f[2] == "order":
		id, err := strconv.Atoi(f[3])
		if err != nil {
			return
		}
		rep.per[ev.role]++
		switch {
		case strings.HasPrefix(ev.role, "enrich"):
			rep.enriched[id]++
		case ev.role == "archive":
			rep.archived[id] = true
		case ev.role == "fraud":
			rep.checked[id] = strings.Join(f[5:], " ")
		}
	}
}

// spawn starts this program as the child of role; its output lines arrive
// on events, then one empty line when it has exited.
func spawn(ctx context.Context, c coordConfig, addr, httpAddr, role string, events chan<- event, quit <-chan struct{}, wg *sync.WaitGroup) (*child, error) {
	cmd := exec.CommandContext(ctx, c.exe)
	// When ctx ends (Ctrl-C, SIGTERM, the run's deadline), the process gets
	// SIGTERM, so that it drains, and is killed if it has not exited
	// childStopTimeout later.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = childStopTimeout
	cmd.Env = append(os.Environ(), roleEnv+"="+role, backendEnv+"="+c.backend, addrEnv+"="+addr,
		ordersEnv+"="+strconv.Itoa(c.orders), httpEnv+"="+httpAddr)
	if c.verbose {
		cmd.Env = append(cmd.Env, verboseEnv+"=1")
	}
	ch := &child{role: role, cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &ch.stderr
	if c.verbose {
		cmd.Stderr = io.MultiWriter(&ch.stderr, os.Stderr)
	}
	cmd.SysProcAttr = childAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	started := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		// The kernel sends the parent-death signal (childAttr) when the
		// thread that started the process ends, not the coordinator: a
		// goroutine that returns while locked to its thread ends that
		// thread. This goroutine starts the process and keeps its thread
		// to itself, locked, until the process has exited, so that no
		// other goroutine can end the thread under it (golang/go#27505).
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); line != "" {
				select {
				case events <- event{role, line}:
				case <-quit: // keep reading, so that the process never blocks on its output
				}
			}
		}
		ch.err = cmd.Wait()
		close(ch.done)
		select {
		case events <- event{role: role}:
		case <-quit:
		}
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", role, err)
	}
	return ch, nil
}

// brokerAddr returns the broker the processes use: the one the flags name,
// or an in-process one the returned stop function closes.
func brokerAddr(ctx context.Context, out io.Writer, c coordConfig) (string, func(), error) {
	switch c.backend {
	case "kafka":
		if c.brokers != "" {
			return c.brokers, func() {}, nil
		}
		cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond))
		if err != nil {
			return "", nil, err
		}
		fmt.Fprintf(out, "in-process Kafka cluster at %s\n", cl.ListenAddrs()[0])
		return cl.ListenAddrs()[0], cl.Close, nil
	case "pulsar":
		if c.url != "" {
			return c.url, func() {}, nil
		}
		b, err := pulsartest.Start(ctx, pulsartest.Options{Logger: c.log})
		if err != nil {
			return "", nil, err
		}
		fmt.Fprintf(out, "in-process Pulsar broker at %s\n", b.URL())
		return b.URL(), func() { _ = b.Close() }, nil
	}
	return "", nil, fmt.Errorf("unknown backend %q (kafka or pulsar)", c.backend)
}

func printReport(out io.Writer, c coordConfig, rep *report) {
	dups := 0
	for _, n := range rep.enriched {
		dups += n - 1
	}
	again := "delivered again"
	if rep.killed != "" {
		again += " after the kill"
	}
	rejected := 0
	for _, v := range rep.checked {
		if v != "ok" {
			rejected++
		}
	}
	fmt.Fprintf(out, "\nenrich handled %d of %d orders (%d %s)\n", len(rep.enriched), c.orders, dups, again)
	fmt.Fprintf(out, "archive handled %d orders; fraud checked %d and rejected %d\n", len(rep.archived), len(rep.checked), rejected)
	fmt.Fprintln(out, "deliveries each process handled (an order delivered again counts again):")
	roles := make([]string, 0, len(rep.per))
	for r := range rep.per {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, r := range roles {
		note := ""
		switch {
		case r == rep.killed:
			note = " (killed)"
		case r == replacement && rep.killed != "":
			note = " (its replacement"
			if rep.per[r] == 0 {
				note += ": no order came to it"
			}
			note += ")"
		}
		fmt.Fprintf(out, "  %-9s %d%s\n", r, rep.per[r], note)
	}
}
