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

	"github.com/boulevard-go/boulevard/internal/benchsrc"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
)

// pairedCost runs Boulevard's side of cfg's workload alone, alternately as
// it is (without) and through with, which runs the same pipeline with one
// addition (its metrics exported and scraped, or its telemetry hooks set).
// Both do the same pipeline work; the only difference is what is named by
// what. It prints each pair's throughput and CPU per message with their
// ratios (with ÷ without), then the medians of the ratios, and the
// allocations per message of each.
func pairedCost(cfg config, rounds, warmup int, what string, with runner, out io.Writer) error {
	var t tally
	if warmup > 0 {
		w := cfg
		w.N = warmup
		for _, run := range []runner{runBoulevard, with} {
			if _, err := measure("warmup", run, w, &t); err != nil {
				return err
			}
		}
	}
	var rates, cpus, offAllocs, onAllocs []float64
	for i := range rounds {
		// Alternate which goes first, so that neither always runs on a
		// heap the other left behind.
		var off, on sample
		var err error
		if i%2 == 0 {
			if off, err = measure("boulevard", runBoulevard, cfg, &t); err == nil {
				on, err = measure("boulevard+", with, cfg, &t)
			}
		} else {
			if on, err = measure("boulevard+", with, cfg, &t); err == nil {
				off, err = measure("boulevard", runBoulevard, cfg, &t)
			}
		}
		if err != nil {
			return err
		}
		rate, cpu := on.MsgsPerSec/off.MsgsPerSec, on.CPUPer/off.CPUPer
		rates, cpus = append(rates, rate), append(cpus, cpu)
		offAllocs, onAllocs = append(offAllocs, off.AllocsPer), append(onAllocs, on.AllocsPer)
		fmt.Fprintf(out, "round %2d  without %12.0f msgs/s %6.0f cpu-ns/msg %7.4f allocs/msg   with %12.0f msgs/s %6.0f cpu-ns/msg %7.4f allocs/msg   throughput %.3f cpu %.3f\n",
			i+1, off.MsgsPerSec, off.CPUPer, off.AllocsPer, on.MsgsPerSec, on.CPUPer, on.AllocsPer, rate, cpu)
	}
	fmt.Fprintf(out, "\nmedian of %d paired rounds, with %s: throughput with ÷ without %.3f, CPU per message with ÷ without %.3f; allocs/msg %.4f without, %.4f with\n",
		rounds, what, median(rates), median(cpus), median(offAllocs), median(onAllocs))
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// runBoulevardHooked is runBoulevard with every telemetry hook set to a
// function that does nothing (durations sampled as by default).
func runBoulevardHooked(cfg config, t *tally) error {
	return runBoulevardHooks(cfg, t, benchsrc.EmptyHooks())
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
	if err := obs.Add(context.Background(), p); err != nil {
		return err
	}
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
