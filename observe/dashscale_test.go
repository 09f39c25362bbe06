package observe_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology/kafkatopology"
)

// largeDeployment returns an Observer holding what a large deployment
// reports: a pipeline whose Kafka member claims parts partitions
// (manyPartitions), a dozen more pipelines of a producer stage, the
// processors and two batchers each, and a Kafka topology backend whose
// group readers claim parts partitions (a few of whose fetches fail, with
// markup in their error) and
// whose releasers claim parts hold partitions (a few of whose releases
// stall), and a Kafka topic whose group and broadcast subscribers read
// parts partitions (a few of whose fetches fail, with markup in their
// error); with the stats of the Kafka source, of the backend and of the
// topic.
func largeDeployment(tb testing.TB, parts int) (*observe.Observer, kafka.Stats, kafkatopology.Stats, topic.Stats) {
	tb.Helper()
	obs := observe.New(observe.Options{})
	pst, kst := manyPartitions(parts)
	pipes := []observe.Pipeline{newFakePipeline(pst)}
	now := time.Now()
	for i := range 12 {
		name := fmt.Sprintf("stage%02d", i)
		pipes = append(pipes, newFakePipeline(pipeline.Stats{Name: name, Time: now, Started: now.Add(-time.Hour),
			Producers: []pipeline.ProducerStats{{StageStatus: producer.StageStatus{Stage: name + ".producer.0",
				State: producer.StateRunning, Since: now.Add(-time.Hour)}}},
			Processors: pipeline.ProcessorStats{Stage: name + ".processor", Concurrency: 8},
			Batchers: []pipeline.BatcherStats{{Name: "default", Stage: name + ".batcher.default", Concurrency: 2, Batches: map[string]uint64{}},
				{Name: "audit", Stage: name + ".batcher.audit", Concurrency: 1, Batches: map[string]uint64{}}}}))
	}
	for _, p := range pipes {
		if err := obs.Add(tb.Context(), p); err != nil {
			tb.Fatal(err)
		}
	}
	if err := obs.AddKafka(tb.Context(), newFixedKafka(kst)); err != nil {
		tb.Fatal(err)
	}
	tst := kafkatopology.Stats{Partitions: make([]kafkatopology.PartitionStats, parts), Holds: make([]kafkatopology.HoldStats, parts)}
	for i := range parts {
		n := int64(i)*7_919 + 1_000_000
		p := kafkatopology.PartitionStats{Topic: "orders", Partition: int32(i), Group: "orders:settlement",
			Committed: n, Next: n + int64(i%500), HighWater: n + int64(i%1_000), Lag: int64(i % 1_000), FetchLag: int64(i%1_000 - i%500)}
		if i%1_000 == 10 {
			p.FetchErr = errors.New("<b class=injected>kafka server</b>: the client is not authorized to access this topic")
		}
		tst.Partitions[i] = p
		tst.Holds[i] = kafkatopology.HoldStats{Topic: "orders-hold-5s", Partition: int32(i), Committed: n, Next: n + 1,
			HighWater: n + int64(i%300), Waiting: int64(i % 300)}
		if i%1_000 == 500 {
			tst.Stalled = append(tst.Stalled, kafkatopology.Stall{Topic: "orders-hold-5s", Partition: int32(i), Offset: n,
				Since: now.Add(-time.Duration(i) * time.Second), Failures: i % 7, Err: kafkatopology.ErrReleaseStalled})
		}
	}
	backend := newFixedKafkaTopology()
	backend.st.Store(&tst)
	if err := obs.AddKafkaTopology("settlement-kafka", backend); err != nil {
		tb.Fatal(err)
	}
	topst := topic.Stats{BalancedGroups: 1, BroadcastSubscribers: 1, Partitions: make([]topic.PartitionStats, parts)}
	for i := range parts {
		n := int64(i)*6_007 + 2_000_000
		p := topic.PartitionStats{Group: "payments:ledger", Partition: int32(i / 2), Committed: n, HighWater: n + int64(i%700), Lag: int64(i % 700)}
		if i%2 == 0 {
			p.Group = ""
		}
		if i%1_000 == 20 {
			p.FetchErr = errors.New("<b class=injected>kafka server</b>: the client is not authorized to access this topic")
		}
		topst.Partitions[i] = p
	}
	if err := obs.AddTopic("payments", fixedTopic(topst)); err != nil {
		tb.Fatal(err)
	}
	return obs, kst, tst, topst
}

// BenchmarkStatsAtManyPartitions measures one /stats of a large
// deployment (largeDeployment) at 4,000 partitions, and reports the bytes
// sent: uncompressed, and to a client that accepts gzip.
func BenchmarkStatsAtManyPartitions(b *testing.B) {
	obs, _, _, _ := largeDeployment(b, scalePartitions(4000))
	h := obs.Handler(nil)
	for _, accept := range []string{"", "gzip"} {
		b.Run("accept="+accept, func(b *testing.B) {
			w := &countingWriter{}
			b.ReportAllocs()
			for b.Loop() {
				w.n = 0
				r := httptest.NewRequest("GET", "/stats", nil)
				if accept != "" {
					r.Header.Set("Accept-Encoding", accept)
				}
				h.ServeHTTP(w, r)
			}
			b.ReportMetric(float64(w.n), "body-bytes")
		})
	}
}

// countingWriter is an http.ResponseWriter that counts the bytes of the
// body and drops them.
type countingWriter struct{ n int }

func (w *countingWriter) Header() http.Header { return http.Header{} }
func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}
func (w *countingWriter) WriteHeader(int) {}

// pollCost is what one poll of the dashboard costs the browser, as the
// page measures it: reading /stats, parsing it, drawing it (render) and
// laying the page out, the rows of its tables after, and its JS heap.
type pollCost struct {
	FetchMs  float64 `json:"fetchMs"`
	ParseMs  float64 `json:"parseMs"`
	RenderMs float64 `json:"renderMs"`
	LayoutMs float64 `json:"layoutMs"`
	FrameMs  float64 `json:"frameMs"`
	Rows     int     `json:"rows"`
	Nodes    int     `json:"nodes"`
	HeapMB   float64 `json:"heapMB"`
	Bytes    int     `json:"bytes"`
}

const measurePoll = `(async () => {
	const t0 = performance.now();
	const r = await fetch("stats", {cache: "no-store"});
	const text = await r.text();
	const t1 = performance.now();
	const snap = JSON.parse(text);
	const t2 = performance.now();
	render(snap);
	const t3 = performance.now();
	void document.body.offsetHeight;
	const t4 = performance.now();
	await new Promise(res => requestAnimationFrame(() => setTimeout(res)));
	const t5 = performance.now();
	return {fetchMs: t1 - t0, parseMs: t2 - t1, renderMs: t3 - t2, layoutMs: t4 - t3, frameMs: t5 - t2,
		rows: document.querySelectorAll("tr").length, nodes: document.getElementsByTagName("*").length,
		heapMB: performance.memory ? performance.memory.usedJSHeapSize / 1e6 : 0, bytes: text.length};
})()`

// drawnTable is one table of the dashboard as drawn: its cells by row,
// the line under it ("" when none) and its button's label.
type drawnTable struct {
	Rows   [][]string `json:"rows"`
	More   string     `json:"more"`
	Button string     `json:"button"`
}

func readTable(t *testing.T, ctx context.Context, id string) drawnTable {
	t.Helper()
	d, err := chromedp.Run(ctx, chromedp.Evaluate[drawnTable](`(() => {
		const root = document.getElementById(`+strconv.Quote(id)+`);
		return {rows: [...root.querySelectorAll("tr")].slice(1).map(tr => [...tr.querySelectorAll("td")].map(td => td.textContent)),
			more: root.querySelector(".more")?.firstChild?.textContent ?? "",
			button: root.querySelector(".more button")?.textContent ?? ""};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// thousands writes n with commas between its groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Guarantee: in a real browser, at 4,000 Kafka partitions
// (BOULEVARD_SCALE_PARTITIONS) and as many topic partitions, Kafka
// topology partitions and hold partitions, each partition table draws 100
// rows, those an operator needs first: the Kafka partitions by most lag,
// the topic partitions and the topology partitions whose fetches fail,
// then by most lag, the hold partitions by most
// letters waiting; under each, a line counts the partitions left out and
// sums their lag (or letters waiting), and its button draws every row,
// then the first 100 again. A producer stage's node lists 10 feeds and a
// line counting the others. Errors stay text. The test logs what a poll
// costs the page. Skipped when no Chromium is installed.
func TestDashboardDrawsTheWorstPartitionsFirstUpToABound(t *testing.T) {
	const bound = 100
	parts := max(scalePartitions(4000), 2*bound)
	ctx, consoleErrors := browser(t)
	obs, kst, tst, topst := largeDeployment(t, parts)
	srv := httptest.NewServer(obs.Handler(nil))
	t.Cleanup(srv.Close)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/dashboard"), chromedp.WaitVisible(chromedp.CSS(`#topologyHolds table`))); err != nil {
		t.Fatal(err)
	}

	type row struct {
		cells []string
		keys  []int64 // the order: greatest first
		sums  []int64 // what the line sums
	}
	check := func(id, noun string, rows []row, sumsText func([]int64) string) {
		t.Helper()
		slices.SortStableFunc(rows, func(a, b row) int { return slices.Compare(b.keys, a.keys) })
		got := readTable(t, ctx, id)
		var want [][]string
		for _, r := range rows[:bound] {
			want = append(want, r.cells)
		}
		if !slices.EqualFunc(got.Rows, want, slices.Equal) {
			n := min(3, len(got.Rows))
			t.Errorf("#%s draws %d rows beginning %q, want the %d that come first, beginning %q", id, len(got.Rows), got.Rows[:n], bound, want[:3])
		}
		left := make([]int64, len(rows[0].sums))
		for _, r := range rows[bound:] {
			for i, v := range r.sums {
				left[i] += v
			}
		}
		if w := thousands(int64(len(rows)-bound)) + " more " + noun + " not shown: " + sumsText(left); got.More != w || got.Button != "show all "+thousands(int64(len(rows))) {
			t.Errorf("#%s's line reads %q, button %q, want %q, %q", id, got.More, got.Button, w, "show all "+thousands(int64(len(rows))))
		}
	}
	var kafkaRows []row
	for _, p := range kst.Members[0].Partitions {
		kafkaRows = append(kafkaRows, row{cells: []string{"orders", p.Topic, fmt.Sprint(p.Partition), "orders.producer.0", fmt.Sprint(p.Committed),
			fmt.Sprint(p.HighWater), fmt.Sprint(p.Lag), fmt.Sprint(p.InFlight), "0"}, keys: []int64{p.Lag, int64(p.InFlight)}, sums: []int64{p.Lag, int64(p.InFlight)}})
	}
	check("kafka", "partitions", kafkaRows, func(s []int64) string {
		return "lag " + thousands(s[0]) + ", in flight " + thousands(s[1]) + " in total"
	})
	var lagRows []row
	for _, p := range tst.Partitions {
		failing, errText := int64(0), ""
		if p.FetchErr != nil {
			failing, errText = 1, p.FetchErr.Error()
		}
		lagRows = append(lagRows, row{cells: []string{"settlement-kafka", p.Group, p.Topic, fmt.Sprint(p.Partition), fmt.Sprint(p.Committed),
			fmt.Sprint(p.HighWater), fmt.Sprint(p.Lag), fmt.Sprint(p.FetchLag), errText}, keys: []int64{failing, p.Lag, p.FetchLag}, sums: []int64{p.Lag, p.FetchLag}})
	}
	check("topologyLag", "partitions", lagRows, func(s []int64) string {
		return "lag " + thousands(s[0]) + ", fetch lag " + thousands(s[1]) + " in total"
	})
	var topicRows []row
	for _, p := range topst.Partitions {
		group, failing, errText := p.Group, int64(0), ""
		if group == "" {
			group = "broadcast"
		}
		if p.FetchErr != nil {
			failing, errText = 1, p.FetchErr.Error()
		}
		topicRows = append(topicRows, row{cells: []string{"payments", group, fmt.Sprint(p.Partition), fmt.Sprint(p.Committed),
			fmt.Sprint(p.HighWater), fmt.Sprint(p.Lag), errText}, keys: []int64{failing, p.Lag}, sums: []int64{failing, p.Lag}})
	}
	check("topicPartitions", "partitions", topicRows, func(s []int64) string {
		failing := ""
		if s[0] > 0 {
			failing = thousands(s[0]) + " with a failing fetch, "
		}
		return failing + "lag " + thousands(s[1]) + " in total"
	})
	var holdRows []row
	for _, h := range tst.Holds {
		holdRows = append(holdRows, row{cells: []string{"settlement-kafka", h.Topic, fmt.Sprint(h.Partition), fmt.Sprint(h.Committed),
			fmt.Sprint(h.HighWater), fmt.Sprint(h.Waiting)}, keys: []int64{h.Waiting}, sums: []int64{h.Waiting}})
	}
	check("topologyHolds", "hold partitions", holdRows, func(s []int64) string { return thousands(s[0]) + " waiting in total" })
	if stalls := readTable(t, ctx, "stalls"); len(stalls.Rows) != len(tst.Stalled) || stalls.More != "" {
		t.Errorf("#stalls draws %d rows and the line %q, want all %d stalls and no line", len(stalls.Rows), stalls.More, len(tst.Stalled))
	}

	click := func() {
		t.Helper()
		// In one evaluation: the page redraws its tables every second.
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(b => (b.click(), true))(document.querySelector("#kafka .more button"))`)); err != nil {
			t.Fatal(err)
		}
	}
	click()
	if all := readTable(t, ctx, "kafka"); len(all.Rows) != parts || all.More != "all "+thousands(int64(parts))+" shown" || all.Button != "show the first 100" {
		t.Errorf("after show all, #kafka draws %d rows, the line %q and the button %q, want %d rows, %q and %q", len(all.Rows), all.More, all.Button,
			parts, "all "+thousands(int64(parts))+" shown", "show the first 100")
	}
	click()
	if first := readTable(t, ctx, "kafka"); len(first.Rows) != bound || first.Button != "show all "+thousands(int64(parts)) {
		t.Errorf("after show the first 100, #kafka draws %d rows and the button %q, want %d and %q", len(first.Rows), first.Button, bound, "show all "+thousands(int64(parts)))
	}

	producer, err := textOf(ctx, `[data-stage="orders.producer.0"]`)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(producer, "feed events/"); n != 10 || !strings.Contains(producer, thousands(int64(parts-10))+" more feeds: ") {
		t.Errorf("the producer stage's node lists %d feeds, want 10 and a line counting %d more: %.300q", n, parts-10, producer)
	}
	injected, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".injected").length`))
	if err != nil {
		t.Fatal(err)
	}
	if injected != 0 {
		t.Errorf("the markup in a fetch error was rendered as %d elements, want it shown as text", injected)
	}
	c, err := chromedp.Run(ctx, chromedp.Evaluate[pollCost](measurePoll, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d partitions: a poll reads %d bytes of /stats in %.0f ms, parses them in %.0f ms, draws %d rows (%d elements) in %.0f ms, "+
		"lays them out in %.0f ms, %.0f ms to the next frame; JS heap %.1f MB",
		parts, c.Bytes, c.FetchMs, c.ParseMs, c.Rows, c.Nodes, c.RenderMs, c.LayoutMs, c.FrameMs, c.HeapMB)
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

// Guarantee: in a real browser, at 4,000 Kafka partitions
// (BOULEVARD_SCALE_PARTITIONS) and as many topic partitions, Kafka
// topology partitions and hold partitions, the dashboard's JS heap does
// not grow with the polls of the busy shares' 30 s window: after 35 polls
// a second apart it holds less than 4 more parsed snapshots than after 3
// (the page keeps the current snapshot, and of the others only what the
// busy shares read).
// The test logs the heap. Skipped when no Chromium is installed.
func TestDashboardHeapStaysBoundedAtManyPartitions(t *testing.T) {
	parts := scalePartitions(4000)
	obs, _, _, _ := largeDeployment(t, parts)
	ctx, consoleErrors := drivenDashboard(t, obs)
	eval := func(js string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js, chromedp.EvalAwaitPromise)); err != nil {
			t.Fatal(err)
		}
	}
	heap := func() float64 {
		t.Helper()
		if _, err := chromedp.Call(ctx, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
			t.Fatal(err)
		}
		u, err := chromedp.Call(ctx, runtime.GetHeapUsage, cdp.Empty{})
		if err != nil {
			t.Fatal(err)
		}
		return u.UsedSize
	}
	// polls renders the next n snapshots, each parsed from /stats' text
	// as a poll parses it, one second after the one before.
	polls := func(n int) {
		t.Helper()
		eval(fmt.Sprintf(`(() => {
			for (let i = 0; i < %d; i++) {
				const s = JSON.parse(snapText);
				s.time = new Date(Date.parse(s.time) + polled++ * 1000).toISOString();
				render(s);
			}
			return true;
		})()`, n))
	}
	eval(`(async () => {
		window.snapText = await (await fetch("snapshot")).text();
		window.polled = 0;
		return true;
	})()`)
	bare := heap()
	eval(`(window.held = JSON.parse(snapText), true)`)
	snapshot := heap() - bare
	eval(`(delete window.held, true)`)
	polls(3)
	after3 := heap()
	polls(32)
	after35 := heap()
	size, err := chromedp.Run(ctx, chromedp.Evaluate[int](`snapText.length`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d partitions: /stats is %d bytes, a parsed snapshot %.1f MB of JS heap; the heap is %.1f MB after 3 polls, %.1f MB after 35",
		parts, size, snapshot/1e6, after3/1e6, after35/1e6)
	if snapshot <= 0 {
		t.Fatalf("a parsed snapshot took %.0f bytes of JS heap, want more than none", snapshot)
	}
	if growth := after35 - after3; growth >= 4*snapshot {
		t.Errorf("the JS heap grew by %.1f MB (%.1f snapshots) from poll 3 to poll 35, want less than 4 snapshots (%.1f MB)",
			growth/1e6, growth/snapshot, 4*snapshot/1e6)
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}
