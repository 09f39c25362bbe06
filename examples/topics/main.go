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
// reason. It prints what happened and exits.
//
//	go run ./examples/topics [-orders 12] [-v]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"
)

func main() {
	orders := flag.Int("orders", 12, "number of orders to ingest")
	verbose := flag.Bool("v", false, "log the pipelines' activity to stderr")
	flag.Parse()
	log := slog.New(slog.DiscardHandler)
	if *verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout, log, *orders); err != nil {
		fmt.Fprintln(os.Stderr, "topics:", err)
		os.Exit(1)
	}
}
