package observe_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/kafkatopology"
)

// chromium returns the path of a Chromium or Chrome binary, or "".
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser starts a headless Chromium for the test (skipping it when none
// is installed) and returns its context, which ends with the test, and a
// function listing the console errors and exceptions the pages raised.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	bin := chromium()
	if bin == "" {
		t.Skip("chromium not installed (Debian package chromium); .ci/run installs it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 720), chromedp.UserDataDir(t.TempDir()))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() {
		cancel()
		cancelBrowser()
		cancelAlloc()
	})
	var mu sync.Mutex
	var consoleErrors []string
	listenErr := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value))
				}
				consoleErrors = append(consoleErrors, strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			consoleErrors = append(consoleErrors, msg)
		}
	})
	if listenErr != nil {
		t.Fatal(listenErr)
	}
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), consoleErrors...)
	}
}

// textOf returns the visible text of the first element matching the CSS
// selector sel ("" when none does), read in one evaluation inside the
// page. The dashboard replaces its elements on every refresh, so a node
// that one DevTools call finds may be gone by the next (chromedp.Text
// makes two); a single evaluation never sees a redraw half done.
func textOf(ctx context.Context, sel string) (string, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(sel)+`)?.innerText ?? ""`))
}

// Guarantee: in a real browser, the dashboard draws a topic that
// LinkTopic connects in both pipelines' graphs, after the publisher's
// stages and before the subscriber's, each linking to the pipeline at the
// other end, lists the Pulsar sources (their failed reconnections and
// abandoned subscribes included), the topics' undecodable messages,
// the topology sources (their failed dead-letterings, settle failures and undecodable letters
// included), the stalled hold releases (their failed attempts and last
// error included), the lag of the partitions a
// Kafka topology backend's group readers claim and the letters waiting in
// the hold partitions its releasers claim, with the error of a partition
// whose fetches fail drawn first, and lists the things whose Stats could not be read
// (/stats' failed) with their errors, as text: markup in an error is
// shown, not rendered. Skipped when no Chromium is
// installed.
func TestDashboardDrawsTopicLinks(t *testing.T) {
	ctx, consoleErrors := browser(t)
	obs := observe.New(observe.Options{})
	broken := newFaulty(pipeline.Stats{Name: "broken", Started: time.Now()})
	add(t, obs, pushPipeline(t, "ingest"), pushPipeline(t, "enrich"), broken)
	broken.setMode(statsPanic)
	h := memTopic(t, "orders", topic.Options{})
	if err := obs.AddTopic("orders", h); err != nil {
		t.Fatal(err)
	}
	const markup = "<b class=injected>audit</b>"
	audit := newFaulty(topic.Stats{})
	audit.setMode(statsPanic)
	if err := obs.AddTopic(markup, audit); err != nil {
		t.Fatal(err)
	}
	if err := obs.AddTopic("ledger", newFaulty(topic.Stats{Published: 9, Undecodable: 4, BroadcastResubscribes: 6})); err != nil {
		t.Fatal(err)
	}
	obs.LinkTopic("orders", observe.TopicLinks{Publishers: []string{"ingest"}, Subscribers: []string{"enrich"}})
	if err := obs.AddPulsar("billing", fixedPulsar(pulsar.Stats{Consumers: 1, Received: 42, ReconnectFailures: 8, SubscribesAbandoned: 3})); err != nil {
		t.Fatal(err)
	}
	stall := kafkatopology.Stall{Topic: "orders-hold-5s", Partition: 2, Offset: 17, Since: time.Now().Add(-time.Hour), Failures: 9,
		Err: errors.New("hold topic refused")}
	kafkaTopologyLag := newFixedKafkaTopology()
	kafkaTopologyLag.st.Store(&kafkatopology.Stats{Stalled: []kafkatopology.Stall{stall}, Partitions: []kafkatopology.PartitionStats{
		{Topic: "orders", Partition: 1, Group: "orders:settlement", Committed: 40, Next: 70, HighWater: 100, Lag: 60, FetchLag: 30},
		{Topic: "orders", Partition: 2, Group: "orders:settlement", Committed: 9, Next: 9, HighWater: 9, FetchErr: errors.New("<b class=injected>fetch</b> denied")}},
		Holds: []kafkatopology.HoldStats{{Topic: "orders-hold-5s", Partition: 3, Committed: 12, Next: 13, HighWater: 20, Waiting: 8}}})
	if err := errors.Join(obs.AddTopology("settlement", fixedTopology(topology.Stats{Received: 34, Acked: 25, DeadLettered: 5, DeadLetterFailed: 4, PoisonedKeys: 6, SettleFailed: 3, Undecodable: 2, BroadcastResubscribes: 7})),
		obs.AddKafkaTopology("settlement-kafka", kafkaTopologyLag)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(obs.Handler(nil))
	t.Cleanup(srv.Close)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/dashboard"),
		chromedp.WaitVisible(chromedp.CSS(`.node.topic`)),
	); err != nil {
		t.Fatal(err)
	}
	// For each pipeline: the index of the topic node among the graph's
	// nodes, and where its link points.
	type drawn struct {
		Index int    `json:"index"`
		Nodes int    `json:"nodes"`
		Href  string `json:"href"`
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]drawn](`(() => {
		const out = {};
		for (const box of document.querySelectorAll(".pipeline")) {
			const nodes = [...box.querySelectorAll(".node")];
			const i = nodes.findIndex(n => n.dataset.topic === "orders");
			out[box.dataset.pipeline] = {index: i, nodes: nodes.length, href: i < 0 ? "" : nodes[i].querySelector("a").getAttribute("href")};
		}
		return out;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	// A push pipeline with one batcher draws the processors and the
	// batcher; the topic comes last in ingest and first in enrich.
	want := map[string]drawn{"ingest": {2, 3, "#pipeline-enrich"}, "enrich": {0, 3, "#pipeline-ingest"}}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("pipeline %s: topic drawn %+v, want %+v", name, got[name], w)
		}
	}
	pulsarRow, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#pulsar td")].map(td => td.textContent).join(" ")`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pulsarRow, "billing 1 ") || !strings.Contains(pulsarRow, " 42 ") || !strings.HasSuffix(pulsarRow, " 8 3") {
		t.Errorf("Pulsar table row %q, want the billing source with 1 consumer, 42 received, and 8 failed reconnections and 3 abandoned subscribes last", pulsarRow)
	}
	for id, want := range map[string]string{"topologies": "settlement 34 25 0 0 0 5 0 4 0 6 0 0 0 3 2 7", "stalls": "settlement-kafka orders-hold-5s 2 17 360",
		"topologyLag":   "settlement-kafka orders:settlement orders 2 9 9 0 0 <b class=injected>fetch</b> denied settlement-kafka orders:settlement orders 1 40 100 60 30 ",
		"topologyHolds": "settlement-kafka orders-hold-5s 3 12 20 8"} {
		row, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#`+id+` td")].map(td => td.textContent).join(" ")`))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(row, want) {
			t.Errorf("#%s table row %q, want it to begin with %q", id, row, want)
		}
	}
	stallRow, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#stalls td")].map(td => td.textContent).join(" ")`))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^settlement-kafka orders-hold-5s 2 17 36\d\d s 9 hold topic refused$`).MatchString(stallRow) {
		t.Errorf("#stalls table row %q, want the stall's backend, topic, partition, offset, an hour stalled, 9 failures and its error", stallRow)
	}
	ledger, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#topics tr")].map(tr => [...tr.querySelectorAll("td")].map(td => td.textContent).join(" ")).find(r => r.startsWith("ledger ")) ?? ""`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(ledger, " 9 0 0 0 0 4 6") {
		t.Errorf("topics table row %q, want the ledger topic with 9 published, 4 undecodable and 6 broadcast resubscribes last", ledger)
	}
	type failedList struct {
		Heading  string   `json:"heading"`
		Items    []string `json:"items"`
		Injected int      `json:"injected"`
	}
	failed, err := chromedp.Run(ctx, chromedp.Evaluate[failedList](`({
		heading: document.querySelector("#failed h2")?.textContent ?? "",
		items: [...document.querySelectorAll("#failed li")].map(li => li.textContent),
		injected: document.querySelectorAll(".injected").length,
	})`))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed := []string{`pipeline "broken": Stats panicked: the stats are broken`, `topic "` + markup + `": Stats panicked`}
	if len(failed.Items) != len(wantFailed) || !strings.Contains(failed.Heading, "could not be read") {
		t.Errorf("the dashboard lists the failures %+v, want a heading and %d items", failed, len(wantFailed))
	} else {
		for i, w := range wantFailed {
			if !strings.Contains(failed.Items[i], w) {
				t.Errorf("failure %d reads %q, want it to contain %q", i, failed.Items[i], w)
			}
		}
	}
	if failed.Injected != 0 {
		t.Errorf("the markup in an error was rendered as %d elements, want it shown as text", failed.Injected)
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

// Guarantee: in a real browser, the dashboard loads without console
// errors, draws one node per stage of a running pipeline (2 producer
// stages, with their feeds' permits, the processors, 2 batchers), and
// its numbers change while messages flow. The screenshot goes to $BOULEVARD_DASHBOARD_SCREENSHOT
// when set (docs/images/dashboard.png is made that way), to a temporary
// directory otherwise. Skipped when no Chromium is installed.
func TestDashboardInARealBrowser(t *testing.T) {
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name: "orders",
		Producer: producer.Options[int]{Source: endless(), Concurrency: 2,
			RateLimit: &producer.RateLimit{Allowed: 100, Interval: 100 * time.Millisecond}},
		Processors: processor.Options[int, int]{Concurrency: 4, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			time.Sleep(time.Millisecond) // a handler that does some work
			if m.Data%50 == 0 {
				return 0, fmt.Errorf("order %d is malformed", m.Data)
			}
			if m.Data%3 == 0 {
				m.SetBatcher("audit")
			}
			return m.Data, nil
		}},
		Batchers: []batcher.Options[int]{
			{Name: "default", BatchSize: 20, BatchTimeout: 100 * time.Millisecond,
				Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil }},
			{Name: "audit", BatchSize: 50, BatchTimeout: 200 * time.Millisecond,
				Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil }},
		},
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
	srv := httptest.NewServer(obs.Handler(nil))
	t.Cleanup(srv.Close)

	ctx, consoleErrors := browser(t)

	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/dashboard"),
		chromedp.WaitVisible(chromedp.CSS(`.node.batcher`)),
	); err != nil {
		t.Fatal(err)
	}
	nodes, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".node").length`))
	if err != nil {
		t.Fatal(err)
	}
	if nodes != 5 {
		t.Errorf("%d stage nodes, want 5 (2 producer stages, processors, 2 batchers)", nodes)
	}
	text := func() string {
		s, err := textOf(ctx, `[data-stage="orders.processor"]`)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	producerText, err := textOf(ctx, `[data-stage="orders.producer.0"]`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(producerText, "feed numbers:") || !strings.Contains(producerText, "permits out") {
		t.Errorf("the producer stage's node does not show its feed's permits: %q", producerText)
	}
	for _, stage := range []string{"orders.processor", "orders.batcher.default"} {
		s, err := textOf(ctx, `[data-stage="`+stage+`"]`)
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`longest call: [0-9]+ s`).MatchString(s) {
			t.Errorf("the node of %s does not show its longest call: %q", stage, s)
		}
	}
	first := text()
	deadline := time.Now().Add(20 * time.Second)
	for text() == first {
		if time.Now().After(deadline) {
			t.Fatalf("the processors' node did not change within 20s: %q", first)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Let the throughput chart gather a few points before the screenshot.
	var points int
	for points < 5 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		if points, err = chromedp.Run(ctx, chromedp.Evaluate[int](`(samples["orders"] || []).length`)); err != nil {
			t.Fatal(err)
		}
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("BOULEVARD_DASHBOARD_SCREENSHOT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "dashboard.png")
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

// Guarantee: in a real browser, the dashboard draws a stage whose chunk or
// batch has run over 60 s as failing, as the shipped alerts fire: the
// processors of a pipeline whose batcher is stalled wait for it and are
// not drawn as failing, those of a pipeline whose batchers are not
// stalled are; a producer stage shows how long its hand-over to the
// processors has been running their PartitionBy, and is drawn as
// failing once that is over 60 s. Skipped when no Chromium is installed.
func TestDashboardDrawsTheStalledStageAsFailing(t *testing.T) {
	ctx, consoleErrors := browser(t)
	obs := observe.New(observe.Options{})
	stalled := func(name string, handOff, processors, batcher time.Duration) *faulty[pipeline.Stats] {
		return newFaulty(pipeline.Stats{Name: name, Started: time.Now(),
			Producers: []pipeline.ProducerStats{{StageStatus: producer.StageStatus{Stage: name + ".producer.0", State: producer.StateRunning,
				Since: time.Now()}, LongestHandOff: handOff}},
			Processors: pipeline.ProcessorStats{Stage: name + ".processor", Concurrency: 1, LongestCall: processors},
			Batchers: []pipeline.BatcherStats{{Name: "default", Stage: name + ".batcher.default", Concurrency: 1,
				Batches: map[string]uint64{}, LongestCall: batcher}}})
	}
	add(t, obs, stalled("batchstall", 0, 90*time.Second, 80*time.Second), stalled("procstall", 30*time.Second, 90*time.Second, 0),
		stalled("handoffstall", 90*time.Second, 0, 0))
	srv := httptest.NewServer(obs.Handler(nil))
	t.Cleanup(srv.Close)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/dashboard"),
		chromedp.WaitVisible(chromedp.CSS(`.node.batcher`)),
	); err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]bool](`Object.fromEntries(
		[...document.querySelectorAll(".node[data-stage]")].map(n => [n.dataset.stage, n.classList.contains("bad")]))`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"batchstall.processor": false, "batchstall.batcher.default": true,
		"procstall.processor": true, "procstall.batcher.default": false,
		"batchstall.producer.0": false, "procstall.producer.0": false, "handoffstall.producer.0": true,
		"handoffstall.processor": false, "handoffstall.batcher.default": false}
	for stage, bad := range want {
		if b, ok := got[stage]; !ok || b != bad {
			t.Errorf("stage %s drawn as failing: %v (drawn: %v), want %v", stage, b, ok, bad)
		}
	}
	for stage, want := range map[string]string{"batchstall.producer.0": "longest hand-off: 0 s",
		"procstall.producer.0": "longest hand-off: 30 s", "handoffstall.producer.0": "longest hand-off: 1 min 30 s"} {
		s, err := textOf(ctx, `[data-stage="`+stage+`"]`)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(s, want) {
			t.Errorf("the node of %s reads %q, want it to show %q", stage, s, want)
		}
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

// drivenDashboard opens the dashboard of obs in the browser, with the
// page's own polls of /stats refused (503), so that the page draws only
// what the test renders: the test calls the page's render with snapshots
// it makes from those /snapshot serves (the Observer's /stats).
func drivenDashboard(t *testing.T, obs *observe.Observer) (context.Context, func() []string) {
	t.Helper()
	ctx, consoleErrors := browser(t)
	h := obs.Handler(nil)
	mux := http.NewServeMux()
	mux.Handle("GET /dashboard", h)
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "the test renders the page", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("GET /snapshot", func(w http.ResponseWriter, r *http.Request) {
		r = r.Clone(r.Context())
		r.URL.Path = "/stats"
		h.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/dashboard")); err != nil {
		t.Fatal(err)
	}
	return ctx, consoleErrors
}

// Guarantee: in a real browser, a stage's busy share is its busy time's
// rate over the last 30 s (or since the page opened, when that is
// shorter), divided by its concurrency, for the processors and each
// batcher: one poll a second, the busy time growing in jumps, the share
// read after each poll is that of the snapshot of 30 s before (or the
// first) to the current one. Skipped when no Chromium is installed.
func TestDashboardBusyShareIsTheRateOverTheLastThirtySeconds(t *testing.T) {
	obs := observe.New(observe.Options{})
	now := time.Now()
	if err := obs.Add(t.Context(), newFakePipeline(pipeline.Stats{Name: "orders", Time: now, Started: now.Add(-time.Hour),
		Processors: pipeline.ProcessorStats{Stage: "orders.processor", Concurrency: 4},
		Batchers:   []pipeline.BatcherStats{{Name: "default", Stage: "orders.batcher.default", Concurrency: 2, Batches: map[string]uint64{}}}})); err != nil {
		t.Fatal(err)
	}
	ctx, consoleErrors := drivenDashboard(t, obs)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(async () => {
		window.snapText = await (await fetch("snapshot")).text();
		return snapText.length;
	})()`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatal(err)
	}
	// The busy time, in seconds, at poll i: the processors take in 12 s
	// every 4 s (75% of 4), the batcher 7 s every 5 s (70% of 2), so a
	// rate over one second reads 0 or many times the concurrency.
	processorsBusy := func(i int) int { return i / 4 * 12 }
	batcherBusy := func(i int) int { return i / 5 * 7 }
	const window = 30
	for i := range 45 {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`(() => {
			const s = JSON.parse(snapText);
			s.time = new Date(Date.parse(s.time) + %d * 1000).toISOString();
			s.pipelines[0].processors.Busy = %d * 1e9;
			s.pipelines[0].batchers[0].Busy = %d * 1e9;
			render(s);
			return ["orders.processor", "orders.batcher.default"].map(st =>
				[...document.querySelector('[data-stage="' + st + '"]').children].map(d => d.textContent).find(x => x.startsWith("busy: ")));
		})()`, i, processorsBusy(i), batcherBusy(i))))
		if err != nil {
			t.Fatal(err)
		}
		old := max(0, i-window)
		share := func(busy func(int) int, concurrency int) string {
			if i == 0 {
				return "busy: 0% of " + strconv.Itoa(concurrency)
			}
			r := float64(busy(i)-busy(old)) / float64(i-old) / float64(concurrency)
			return fmt.Sprintf("busy: %d%% of %d", int(math.Floor(r*100+0.5)), concurrency)
		}
		if want := []string{share(processorsBusy, 4), share(batcherBusy, 2)}; !slices.Equal(got, want) {
			t.Errorf("after poll %d (the window from poll %d), the processors and the batcher read %q, want %q", i, old, got, want)
		}
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}
