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
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed (Debian package prometheus); .ci/run installs it")
	}
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
	obs.Add(p)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	target := httptest.NewServer(obs.Handler(nil)) // listens on 127.0.0.1
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

	query := "rate(boulevard_processor_messages_received_total[5s])"
	var last string
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, err := promQuery(promAddr, query)
		if err == nil && v > 0 {
			t.Logf("%s = %v", query, v)
			break
		}
		last = fmt.Sprintf("value %v, error %v", v, err)
		if time.Now().After(deadline) {
			t.Fatalf("%s not above 0 within 60s (last: %s)", query, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if v, err := promQuery(promAddr, `boulevard_producer_state{state="running"}`); err != nil || v != 1 {
		t.Errorf("producer state running = %v (%v), want 1", v, err)
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
