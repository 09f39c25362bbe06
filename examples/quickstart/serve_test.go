package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/examples/internal/monitor"
	"github.com/boulevard-go/boulevard/internal/wait"
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
	wait.For(t, "the metrics address printed", func() bool {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	}, out.String)
	// The server listens before the pipeline is added to it and started:
	// the pipeline's series appear once it runs.
	var body string
	wait.For(t, "/metrics to show the pipeline up", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return strings.Contains(body, `boulevard_pipeline_up{pipeline="quickstart"} 1`)
	}, func() string { return fmt.Sprintf("%.2000s", body) })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("still serving after the pipeline returned")
	}
}
