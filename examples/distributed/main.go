// Command distributed runs the pipelines of examples/topics as separate
// operating-system processes linked by topics on Kafka (or Pulsar):
//
//	ingest ──► orders (group "enrichers": 2 processes) ──► enrich ──► audit ─┬─► archive (group "archive")
//	                                                                         └─► fraud   (group "fraud")
//
// The command is the coordinator: it starts an in-process broker (kfake for
// Kafka, pulsartest for Pulsar) unless told where a real one is, starts each
// pipeline as a child process (this same program, with its role in the
// environment), kills one enrich process mid-run with SIGKILL and starts a
// replacement, and reports what every process handled. Every process loads
// the same topic document and wiring; the topics are declared by whichever
// process comes first, idempotently. On Linux a process gets SIGTERM
// from the kernel when the coordinator dies without stopping it (SIGKILL,
// a second Ctrl-C), its parent-death signal, so that none outlives it.
//
// Across processes a publish is settled when the broker has stored it
// (ack_propagation is disabled: outcomes do not travel back to the
// publisher), so delivery is at least once: the messages the killed
// process had received and not yet committed are delivered again to the
// other members of its group.
//
//	go run ./examples/distributed                                   # Kafka, in process
//	go run ./examples/distributed -backend pulsar                   # Pulsar, in process
//	go run ./examples/distributed -brokers 127.0.0.1:9092           # docker-compose Kafka
//	go run ./examples/distributed -backend pulsar -url pulsar://127.0.0.1:6650
//	go run ./examples/distributed -http 127.0.0.1:2112 -linger           # metrics and dashboard of each process
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/boulevard-go/boulevard/examples/internal/interrupt"
	"github.com/boulevard-go/boulevard/examples/internal/monitor"
)

func main() {
	if role := os.Getenv(roleEnv); role != "" {
		// A child process: run one pipeline until told to stop.
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		if err := runRole(ctx, os.Stdout, role, childConfig()); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
			os.Exit(1)
		}
		return
	}
	var c coordConfig
	flag.StringVar(&c.backend, "backend", "kafka", "kafka or pulsar")
	flag.StringVar(&c.brokers, "brokers", "", "Kafka bootstrap broker host:port (default: an in-process cluster)")
	flag.StringVar(&c.url, "url", "", "Pulsar service URL (default: an in-process broker)")
	flag.IntVar(&c.orders, "orders", 40, fmt.Sprintf("number of orders to ingest (0 to %d)", maxOrders))
	flag.BoolVar(&c.kill, "kill", true, "kill one enrich process mid-run and start a replacement")
	verbose := flag.Bool("v", false, "log the processes' activity to stderr")
	var mon monitor.Flags
	flag.StringVar(&mon.HTTP, "http", "", "serve each process's metrics and dashboard from this host:port on, one port per process in the order they start (for example 127.0.0.1:2112)")
	flag.Var(&mon.Linger, "linger", "keep the processes running and serving after the report: alone until interrupted, or for a duration")
	flag.Parse()
	c.http, c.linger = mon.HTTP, mon.Linger
	c.verbose = *verbose
	c.log = slog.New(slog.DiscardHandler)
	if c.verbose {
		c.log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "distributed:", err)
		os.Exit(1)
	}
	c.exe = exe
	// Ctrl-C or SIGTERM stops the run: the processes get SIGTERM and
	// drain, and the error says how far the run got.
	interrupted, stop := interrupt.Context(context.Background())
	defer stop()
	ctx, cancel := context.WithTimeout(interrupted, 2*time.Minute)
	if c.linger != 0 {
		ctx, cancel = context.WithCancel(interrupted) // lingering lasts as long as asked
	}
	defer cancel()
	if _, err := coordinate(ctx, os.Stdout, c); err != nil {
		fmt.Fprintln(os.Stderr, "distributed:", err)
		os.Exit(1)
	}
}
