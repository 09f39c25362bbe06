// Command retries settles orders through a topology on the in-memory
// backend: a flaky downstream makes some orders retry through two hold
// queues (1s, then 2s), a malformed order is rejected into the dead-letter
// queue, and a sequenced ledger topic shows FailAll: once one entry of an
// account is rejected, that account's later entries are dead-lettered too,
// while other accounts carry on. Then it plays the operator: it reads the
// ledger's DLQ through a pipeline, and replays the dead order (a dry run
// first) once the bug that killed it is fixed. It prints what went where
// and exits, in about three seconds. Ctrl-C (or SIGTERM) before then
// stops it with status 1 and an error saying what it was waiting for and
// how far that had got.
//
//	go run ./examples/retries [-v] [-http 127.0.0.1:2116 [-linger]]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/boulevard-go/boulevard/examples/internal/interrupt"
	"github.com/boulevard-go/boulevard/examples/internal/monitor"
	"github.com/boulevard-go/boulevard/observe"
)

func main() {
	verbose := flag.Bool("v", false, "log the pipelines' and the topology's activity to stderr")
	var mon monitor.Flags
	mon.Register(flag.CommandLine)
	flag.Parse()
	log := slog.New(slog.DiscardHandler)
	if *verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	// Ctrl-C or SIGTERM stops the run; the error says what it was waiting
	// for.
	interrupted, stop := interrupt.Context(context.Background())
	defer stop()
	ctx, cancel := context.WithTimeout(interrupted, time.Minute)
	defer cancel()
	obs := observe.New(observe.Options{})
	srv, err := mon.Serve(ctx, obs, os.Stdout)
	if err == nil {
		err = run(ctx, os.Stdout, log, obs)
		srv.Close(interrupted) // for as long as -linger says
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "retries:", err)
		os.Exit(1)
	}
}
