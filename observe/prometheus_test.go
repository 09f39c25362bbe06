package observe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// endless delivers numbered messages as fast as its permits allow until
// its run ends.
func endless() producer.Source[int] {
	return producer.SourceFunc[int](func(ctx context.Context, stage *producer.Stage[int]) error {
		feed := stage.NewFeed("numbers", nil)
		for i := 0; ; {
			n, err := feed.Acquire(ctx, 100)
			if err != nil {
				return nil
			}
			for ; n > 0; n-- {
				feed.Deliver(message.New(i, acker.Discard, uint64(i)))
				i++
			}
		}
	})
}

// Guarantee: a real Prometheus server scraping the handler every second
// sees the processors' counters increase: rate() over them is not zero
// (skipped when the prometheus binary is not installed).
func TestRealPrometheusScrapesTheHandler(t *testing.T) {
	requirePrometheus(t)
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name: "scraped",
		Producer: producer.Options[int]{Source: endless(), Concurrency: 1,
			RateLimit: &producer.RateLimit{Allowed: 50, Interval: 100 * time.Millisecond}},
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			return m.Data, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	obs := observe.New(observe.Options{})
	add(t, obs, p)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	promAddr := startPrometheus(t, obs.Handler(nil))

	query := "rate(boulevard_processor_messages_received_total[5s])"
	v := promEventually(t, promAddr, query, func(v float64) bool { return v > 0 })
	t.Logf("%s = %v", query, v)
	if v, err := promQuery(promAddr, `boulevard_producer_state{state="running"}`); err != nil || v != 1 {
		t.Errorf("producer state running = %v (%v), want 1", v, err)
	}
}

// requirePrometheus skips the test when the prometheus binary is not
// installed, and returns its path.
func requirePrometheus(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed (Debian package prometheus); .ci/run installs it")
	}
	return bin
}

// startPrometheus serves h on 127.0.0.1 and starts a real Prometheus
// (skipping the test when it is not installed) that scrapes it every
// second, as job "boulevard"; it returns the address of Prometheus's API.
// Both stop with the test, and Prometheus's log is shown if it failed.
func startPrometheus(t *testing.T, h http.Handler) string {
	t.Helper()
	bin := requirePrometheus(t)
	target := httptest.NewServer(h) // listens on 127.0.0.1
	t.Cleanup(target.Close)
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: boulevard\n    static_configs:\n      - targets: [%q]\n",
		target.Listener.Addr().String())
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	promAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr)
	logPath := filepath.Join(dir, "prometheus.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("prometheus log:\n%s", b)
			}
		}
	})
	return promAddr
}

// promEventually runs query against the Prometheus at addr until its first
// sample's value satisfies ok, and returns that value; it fails the test
// after 60s (Prometheus starts, then scrapes once a second).
func promEventually(t *testing.T, addr, query string, ok func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, err := promQuery(addr, query)
		if err == nil && ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not as expected within 60s (last: value %v, error %v)", query, v, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// promQuery runs an instant query and returns its first sample's value.
func promQuery(addr, query string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "success" || len(body.Data.Result) == 0 {
		return 0, fmt.Errorf("status %q, %d samples", body.Status, len(body.Data.Result))
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}
