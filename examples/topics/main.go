// Command topics wires four pipelines through internal topics declared in
// YAML, with Ack/Nack propagation across every hop, on the in-memory
// backend:
//
//	ingest ──► orders (balanced, group "enrichers") ──► enrich ──► audit (broadcast, ack_mode all) ──► archive
//	                                                                                                └─► fraud
//
// ingest's source learns an order's outcome only once archive and fraud
// have both handled it; when fraud rejects an order, the rejection travels
// back through audit, enrich and orders to ingest's source, with fraud's
// reason. It prints what happened and exits. Ctrl-C (or SIGTERM) before
// the report stops it with status 1 and an error saying how many of the
// orders' outcomes were in.
//
//	go run ./examples/topics [-orders 12] [-v] [-http 127.0.0.1:2115 [-linger]]
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
	orders := flag.Int("orders", 12, fmt.Sprintf("number of orders to ingest (0 to %d)", maxOrders))
	verbose := flag.Bool("v", false, "log the pipelines' activity to stderr")
	var mon monitor.Flags
	mon.Register(flag.CommandLine)
	flag.Parse()
	log := slog.New(slog.DiscardHandler)
	if *verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	// Ctrl-C or SIGTERM stops the run; it says how many outcomes were in.
	interrupted, stop := interrupt.Context(context.Background())
	defer stop()
	ctx, cancel := context.WithTimeout(interrupted, 30*time.Second)
	defer cancel()
	obs := observe.New(observe.Options{})
	srv, err := mon.Serve(ctx, obs, os.Stdout)
	if err == nil {
		err = runObserved(ctx, os.Stdout, log, *orders, obs)
		srv.Close(interrupted) // for as long as -linger says
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "topics:", err)
		os.Exit(1)
	}
}
