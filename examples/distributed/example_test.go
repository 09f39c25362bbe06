package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/examples/internal/exampletest"
	"github.com/boulevard-go/boulevard/examples/internal/monitor"
)

// TestMain runs a child's role when the coordinator started this test
// binary as one of its processes, and the tests otherwise.
func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		err := runRole(ctx, os.Stdout, role, childConfig())
		stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	exampletest.RunMain(main) // a coordinator started by exampletest.Start
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

func coordinateIn(t *testing.T, backend string, orders int) (*report, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rep, err := coordinate(ctx, &out, coordConfig{backend: backend, orders: orders, kill: true,
		exe: os.Args[0], log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("%v\noutput so far:\n%s", err, out.String())
	}
	return rep, out.String()
}

// Guarantee: the report speaks of a kill only when a process was killed
// (-kill=false, or too few orders for enrich-1 to reach the kill).
func TestTheReportMentionsAKillOnlyAfterOne(t *testing.T) {
	rep := &report{enriched: map[int]int{1: 1}, per: map[string]int{"enrich-1": 1}}
	for _, killed := range []string{"", "enrich-1"} {
		rep.killed = killed
		var out bytes.Buffer
		printReport(&out, coordConfig{orders: 1}, rep)
		if got, want := strings.Contains(out.String(), "kill"), killed != ""; got != want {
			t.Errorf("killed %q: the report mentions a kill: %v, want %v:\n%s", killed, got, want, out.String())
		}
	}
}

// Pipelines in separate processes, linked by Kafka topics: with one enrich
// process killed by SIGKILL mid-run and replaced, every order is enriched
// at least once, and archive and fraud each handle every order.
func TestDistributedOverKafkaSurvivesAKilledMember(t *testing.T) {
	checkRun(t, "kafka")
}

// The same on Pulsar.
func TestDistributedOverPulsarSurvivesAKilledMember(t *testing.T) {
	checkRun(t, "pulsar")
}

func checkRun(t *testing.T, backend string) {
	const orders = 40
	rep, out := coordinateIn(t, backend, orders)
	for id := 1; id <= orders; id++ {
		if rep.enriched[id] == 0 || !rep.archived[id] || rep.checked[id] == "" {
			t.Fatalf("order %d: enriched %d times, archived %v, fraud %q\n%s", id, rep.enriched[id], rep.archived[id], rep.checked[id], out)
		}
		if want := id * 37 % 1000; (want > 900) != strings.HasPrefix(rep.checked[id], "rejected") {
			t.Fatalf("order %d (amount %d): fraud said %q", id, want, rep.checked[id])
		}
	}
	if rep.killed != "enrich-1" || rep.per["enrich-3"]+rep.per["enrich-2"] == 0 {
		t.Fatalf("no member took over after the kill: %v\n%s", rep.per, out)
	}
	if len(rep.archived) != orders || len(rep.checked) != orders {
		t.Fatalf("archive %d, fraud %d, want %d each", len(rep.archived), len(rep.checked), orders)
	}
	// Every consumer process is in the report, the replacement even when
	// no order came to it, and the killed one is marked.
	for _, r := range []string{"archive", "fraud", "enrich-1", "enrich-2", replacement} {
		line := fmt.Sprintf("\n  %-9s %d", r, rep.per[r])
		if r == "enrich-1" {
			line += " (killed)"
		}
		if !strings.Contains(out, line) {
			t.Errorf("the report has no line %q:\n%s", line[1:], out)
		}
	}
	t.Log(out)
}

// With -http and -linger every process serves its own metrics, and they
// stay up after the report: archive's show every order received.
func TestEveryProcessServesItsMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	linger, stop := context.WithCancel(ctx)
	var out monitor.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := coordinate(linger, &out, coordConfig{backend: "kafka", orders: 20, exe: os.Args[0],
			log: slog.New(slog.DiscardHandler), http: "127.0.0.1:0", linger: monitor.Forever})
		done <- err
	}()
	served := regexp.MustCompile(`(?m)^archive: metrics on http://(127\.0\.0\.1:\d+)/metrics`)
	var addr string
	for addr == "" || !strings.Contains(out.String(), "keep running and serving until interrupted") {
		if m := served.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("coordinate returned %v before lingering:\n%s", err, out.String())
		case <-ctx.Done():
			t.Fatalf("never lingered with archive's address:\n%s", out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	received := regexp.MustCompile(`boulevard_processor_messages_received_total\{pipeline="archive"\} (\d+)`).FindSubmatch(body)
	if received == nil {
		t.Fatalf("archive's /metrics lacks its processors' counter:\n%s", body)
	}
	if n, _ := strconv.Atoi(string(received[1])); n < 20 {
		t.Fatalf("archive's processors received %d messages, want at least 20", n)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A negative -orders, or one past the bound, is refused with an error
// naming the flag, before any broker or process starts.
func TestOrdersOutOfRangeRefused(t *testing.T) {
	for _, n := range []int{-1, maxOrders + 1} {
		_, err := coordinate(t.Context(), io.Discard, coordConfig{backend: "kafka", orders: n, exe: os.Args[0],
			log: slog.New(slog.DiscardHandler)})
		if err == nil || !strings.Contains(err.Error(), "-orders must be 0 to") {
			t.Errorf("coordinate with -orders %d = %v, want an error naming -orders", n, err)
		}
	}
}

// Guarantee: SIGTERM stops the coordinator the way Ctrl-C does: it stops
// its processes (SIGTERM, then SIGKILL after childStopTimeout), says how
// far the run got and exits 1, instead of dying at once and leaving its
// processes running.
func TestSIGTERMStopsTheProcessesAndReports(t *testing.T) {
	p := exampletest.Start(t, "-orders", strconv.Itoa(maxOrders), "-kill=false")
	p.WaitOutput("processes: archive", time.Minute)
	p.Signal(syscall.SIGTERM)
	if code := p.Wait(childStopTimeout + time.Minute); code != 1 {
		t.Fatalf("exit status %d, want 1\nstderr:\n%s", code, p.Stderr())
	}
	if want := fmt.Sprintf(" of %d orders enriched", maxOrders); !strings.Contains(p.Stderr(), want) {
		t.Fatalf("stderr lacks %q:\n%s", want, p.Stderr())
	}
}
