package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
)

// metricsCost runs Boulevard's side of cfg's workload alone, alternately
// without and with its metrics exported: with them, the pipeline is added
// to an observe.Observer registered on a Prometheus registry, and /metrics
// is served (into a recorder) every interval while it runs, as a scraping
// Prometheus would ask for it. Both sides do the same pipeline work; the
// only difference is the export. It prints each pair's throughput ratio
// (with ÷ without) and their median, and the allocations per message of
// each side.
func metricsCost(cfg config, rounds, warmup int, interval time.Duration, out io.Writer) error {
	var t tally
	with := func(cfg config, t *tally) error { return runBoulevardScraped(cfg, t, interval) }
	if warmup > 0 {
		w := cfg
		w.N = warmup
		for _, run := range []runner{runBoulevard, with} {
			if _, err := measure("warmup", run, w, &t); err != nil {
				return err
			}
		}
	}
	var ratios []float64
	var offAllocs, onAllocs []float64
	for i := range rounds {
		off, err := measure("boulevard", runBoulevard, cfg, &t)
		if err != nil {
			return err
		}
		on, err := measure("boulevard+metrics", with, cfg, &t)
		if err != nil {
			return err
		}
		ratios = append(ratios, on.MsgsPerSec/off.MsgsPerSec)
		offAllocs, onAllocs = append(offAllocs, off.AllocsPer), append(onAllocs, on.AllocsPer)
		fmt.Fprintf(out, "round %d  without %12.0f msgs/s %7.4f allocs/msg   with metrics %12.0f msgs/s %7.4f allocs/msg   ratio %.3f\n",
			i+1, off.MsgsPerSec, off.AllocsPer, on.MsgsPerSec, on.AllocsPer, on.MsgsPerSec/off.MsgsPerSec)
	}
	fmt.Fprintf(out, "\nmedian of %d paired rounds, /metrics served every %s: throughput with ÷ without %.3f; allocs/msg %.4f without, %.4f with\n",
		rounds, interval, median(ratios), median(offAllocs), median(onAllocs))
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// runBoulevardScraped is runBoulevard with the pipeline's metrics served
// every interval until it has finished.
func runBoulevardScraped(cfg config, t *tally, interval time.Duration) error {
	src := &blvdSource{n: cfg.N, ack: &blvdAcker{t: t}}
	p, err := pipeline.New(batchingOptions("compare", src, cfg, t))
	if err != nil {
		return err
	}
	obs := observe.New(observe.Options{})
	reg := prometheus.NewRegistry()
	if err := reg.Register(obs); err != nil {
		return err
	}
	obs.Add(p)
	h := obs.Handler(reg)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				if rec.Code != http.StatusOK {
					panic(fmt.Sprintf("/metrics answered %d", rec.Code))
				}
			}
		}
	}()
	err = p.Run(context.Background())
	close(stop)
	wg.Wait()
	return err
}
