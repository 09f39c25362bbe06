package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/examples/internal/monitor"
)

// Guarantee: with -http the quickstart serves the pipeline's metrics on the
// given address while it runs, and stops serving when it returns (without
// -linger).
func TestHTTPFlagServesMetricsWhileRunning(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out monitor.Buffer
	done := make(chan error, 1)
	go func() {
		// Enough orders to outlast the request below; cancelled after it.
		done <- run(ctx, config{n: 1 << 30, customers: 2, seed: 1, monitor: monitor.Flags{HTTP: "127.0.0.1:0"}}, &out)
	}()
	re := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/metrics`)
	var addr string
	deadline := time.Now().Add(10 * time.Second)
	for addr == "" {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no metrics address printed within 10s:\n%s", out.String())
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `boulevard_pipeline_up{pipeline="quickstart"} 1`) {
		t.Errorf("/metrics while running lacks boulevard_pipeline_up 1:\n%.2000s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("still serving after the pipeline returned")
	}
}
