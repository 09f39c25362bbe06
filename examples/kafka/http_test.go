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

// With -http and -linger the example keeps serving its metrics after the
// run, until interrupted: they show the finished run (every record
// received, the pipeline down).
func TestHTTPWithLingerServesTheFinishedRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	interrupt, stop := context.WithCancel(ctx)
	var out monitor.Buffer
	const n = 500
	cfg := config{topic: "readings", group: "example-http", n: n, partitions: 2, members: 1, produce: true,
		strategy: "cooperative-sticky", monitor: monitor.Flags{HTTP: "127.0.0.1:0", Linger: monitor.Forever}}
	done := make(chan error, 1)
	go func() { done <- run(interrupt, cfg, &out) }()
	lingering := regexp.MustCompile(`still serving on http://(127\.0\.0\.1:\d+) until interrupted`)
	var addr string
	for addr == "" {
		if m := lingering.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
			continue
		}
		select {
		case err := <-done:
			t.Fatalf("run returned %v without lingering:\n%s", err, out.String())
		case <-ctx.Done():
			t.Fatalf("never lingered:\n%s", out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`boulevard_pipeline_up{pipeline="readings"} 0`,
		`boulevard_processor_messages_received_total{pipeline="readings"} 500`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics after the run lacks %s", want)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("still serving once interrupted")
	}
}
