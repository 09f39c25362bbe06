package observe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// parseExposition parses a /metrics body in the text format, and returns
// each series (its name and labels, as "name{k=v,...}") with its
// metric's type and value, or an error when the body does not parse or
// carries a series twice.
func parseExposition(body string) (map[string]scraped, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("the body does not parse: %w", err)
	}
	out := map[string]scraped{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			slices.Sort(labels)
			key := name + "{" + strings.Join(labels, ",") + "}"
			if _, ok := out[key]; ok {
				return nil, fmt.Errorf("series %s is carried twice", key)
			}
			out[key] = scraped{typ: f.GetType(), value: value(m)}
		}
	}
	return out, nil
}

// scraped is one series of a scrape: its metric's type and its value.
type scraped struct {
	typ   dto.MetricType
	value float64
}

// isConnError reports whether err, from an http.Client's Do, is a failed
// connection: refused, reset, or closed before an answer came.
func isConnError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// getWhole GETs url with client and checks the answer is whole: 200 and
// a body that parses (the text format for /metrics, JSON otherwise). It
// returns the error of Do as it is, and any other failure wrapped in
// errNotWhole.
func getWhole(client *http.Client, url, path string) error {
	resp, err := client.Get(url + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%w: reading the body: %w", errNotWhole, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: status %d: %.200s", errNotWhole, resp.StatusCode, body)
	}
	if path == "/metrics" {
		s, err := parseExposition(string(body))
		if err != nil {
			return fmt.Errorf("%w: %w", errNotWhole, err)
		}
		if _, ok := s[`boulevard_pipeline_up{pipeline=orders}`]; !ok {
			return fmt.Errorf("%w: no boulevard_pipeline_up for orders in\n%.200s", errNotWhole, body)
		}
		return nil
	}
	if !json.Valid(body) {
		return fmt.Errorf("%w: not JSON (%d bytes): %.200q", errNotWhole, len(body), body)
	}
	return nil
}

var errNotWhole = errors.New("not a whole answer")

// Guarantee: Server.Close racing clients that request /metrics,
// /healthz, /readyz and /stats without pause lets every request either
// end with a whole answer (200, a body that parses: the text format for
// /metrics, JSON for the others) or fail with a connection error; Close
// returns nil before its context ends, no connection is left open, and
// no goroutine of the server or the clients is left: the requests being
// handled when Close is called finish (ShutdownTimeout is long enough).
func TestServerCloseRacingScrapesAnswersEachWholeOrNot(t *testing.T) {
	const rounds, clients = 5, 4
	paths := []string{"/metrics", "/healthz", "/readyz", "/stats"}
	obs := observe.New(observe.Options{Logger: quiet})
	defer obs.Close(context.Background())
	add(t, obs, pushPipeline(t, "orders"))
	for i := range 200 { // answers long enough to be cut short
		add(t, obs, statsOf{Name: fmt.Sprintf("filler-%d", i), Started: time.Now()})
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)
	for round := range rounds {
		before := goleak.IgnoreCurrent()
		s := startServer(t, obs, observe.ServerOptions{Gatherer: reg, ShutdownTimeout: 10 * time.Second})
		tr := &http.Transport{}
		client := &http.Client{Transport: tr}
		url := "http://" + s.Addr()
		stop := make(chan struct{})
		answered := make(chan struct{}, clients)
		failed := make(chan error, clients)
		var wg sync.WaitGroup
		for i := range clients {
			wg.Go(func() {
				whole := false
				for n := 0; ; n++ {
					path := paths[(i+n)%len(paths)]
					err := getWhole(client, url, path)
					if err != nil && !isConnError(err) || errors.Is(err, errNotWhole) {
						failed <- fmt.Errorf("GET %s: %w", path, err)
						return
					}
					if err == nil && !whole {
						whole = true
						answered <- struct{}{}
					}
					select {
					case <-stop:
						return
					default:
					}
				}
			})
		}
		for range clients {
			select {
			case <-answered: // every client under way
			case err := <-failed:
				t.Fatalf("round %d, before Close: %v", round, err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := s.Close(ctx)
		cancel()
		close(stop)
		wg.Wait()
		tr.CloseIdleConnections()
		if err != nil {
			t.Fatalf("round %d: Close racing scrapes = %v, want nil", round, err)
		}
		select {
		case err := <-failed:
			t.Fatalf("round %d: a request racing Close got neither a whole answer nor a connection error: %v", round, err)
		default:
		}
		if n := observe.OpenConns(s); n != 0 {
			t.Fatalf("round %d: %d connection(s) still open after Close", round, n)
		}
		if err := goleak.Find(before); err != nil {
			t.Fatalf("round %d: goroutines left after Close: %v", round, err)
		}
	}
}

// blinkingFeeds is a source that keeps a feed "steady" open, delivering
// one message at a time, and between two of them opens a feed of another
// name ("blink-0" to "blink-2"), delivers what it can take at once, and
// closes it, until its run ends.
func blinkingFeeds() producer.Source[int] {
	return producer.SourceFunc[int](func(ctx context.Context, stage *producer.Stage[int]) error {
		steady := stage.NewFeed("steady", nil)
		defer steady.Close()
		for k := 0; ; k++ {
			if _, err := steady.Acquire(ctx, 1); err != nil {
				return nil
			}
			steady.Deliver(message.New(k, acker.Discard, uint64(k)))
			blink := stage.NewFeed(fmt.Sprintf("blink-%d", k%3), nil)
			for i := range blink.TryAcquire(1) {
				blink.Deliver(message.New(i, acker.Discard, uint64(i)))
			}
			blink.Close()
		}
	})
}

// Guarantee: scrapes racing Add, Remove and Replace of pipelines, while a
// producer stage opens and closes feeds, each parse, carry no series
// twice, and no counter goes down from one scrape to the next (those of
// the feeds that blink excepted: each opening starts them again); the
// counters of the pipeline with the feed that stays open, and of the
// pipeline removed and added again, go on from where they were.
func TestScrapesRacingChangesAndBlinkingFeedsNeverLowerACounter(t *testing.T) {
	const scrapes = 60
	churn, err := pipeline.New(pipeline.Options[int, int]{
		Name:       "churn",
		Producer:   producer.Options[int]{Source: blinkingFeeds(), Concurrency: 1},
		Processors: processor.Options[int, int]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := churn.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = churn.Stop(context.Background()) })
	other := pushPipeline(t, "other")
	push(t, other, acker.NewRecorder(false), 0, 10)
	wait.For(t, "the other pipeline's processors took 10 messages", func() bool { return other.Stats().Processors.In == 10 })
	obs := observe.New(observe.Options{Logger: quiet})
	defer obs.Close(context.Background())
	add(t, obs, churn, other)
	h := obs.Handler(nil)

	stop := make(chan struct{})
	changeErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				changeErr <- nil
				return
			default:
			}
			obs.Remove("other")
			if err := obs.Add(t.Context(), other); err != nil {
				changeErr <- fmt.Errorf("Add of the removed pipeline: %w", err)
				return
			}
			if _, err := obs.Replace(t.Context(), churn); err != nil {
				changeErr <- fmt.Errorf("Replace of the pipeline by itself: %w", err)
				return
			}
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
		if err := <-changeErr; err != nil {
			t.Error(err)
		}
	}()

	last := map[string]float64{}
	for n := range scrapes {
		code, body := serveMetrics(t, h)
		if code != http.StatusOK {
			t.Fatalf("scrape %d: /metrics answered %d:\n%s", n, code, body)
		}
		got, err := parseExposition(body)
		if err != nil {
			t.Fatalf("scrape %d: %v:\n%s", n, err, body)
		}
		for key, s := range got {
			if s.typ != dto.MetricType_COUNTER || strings.Contains(key, "feed=blink-") {
				continue
			}
			if prev, ok := last[key]; ok && s.value < prev {
				t.Errorf("scrape %d: counter %s went down from %v to %v", n, key, prev, s.value)
			}
			last[key] = s.value
		}
	}
	if _, ok := last[`boulevard_producer_feed_messages_delivered_total{feed=steady,pipeline=churn,stage=churn.producer.0}`]; !ok {
		t.Errorf("no scrape carried the steady feed's delivered counter; counters seen: %v", slices.Sorted(maps.Keys(last)))
	}
}

// Guarantee: two open feeds of a stage with the same name are one series,
// their counters added, and when one of them closes the series' counters
// do not go down: the closed feed's counts stay in them, and the feed
// left open adds its own from there. A Prometheus counter that went down
// would read as a reset. A lone feed registered again counts from zero,
// and its series reads as the reset it is.
func TestAFeedsTwinClosingLowersNoCounterOfTheirSeries(t *testing.T) {
	checkFeedSeries(t, []feedStep{
		{"both open", []producer.FeedStats{{Granted: 10, Delivered: 5, Dispatched: 5}, {Granted: 7, Delivered: 7, Dispatched: 7}}, 17, 12, 12},
		{"the twin closed", []producer.FeedStats{{Granted: 12, Delivered: 6, Dispatched: 6}}, 17, 12, 12},
		{"the feed left open counted on", []producer.FeedStats{{Granted: 20, Delivered: 15, Dispatched: 14}}, 25, 21, 20},
		{"every feed closed", nil, -1, -1, -1},
		{"a feed of the name opened again", []producer.FeedStats{{Granted: 3, Delivered: 1, Dispatched: 1}}, 3, 1, 1},
		{"the lone feed registered again since", []producer.FeedStats{{Granted: 2, Delivered: 0, Dispatched: 0}}, 2, 0, 0},
	})
}

// Guarantee: when three feeds of a stage share a name and two of them
// close one scrape after the other, the series keeps the counts of each
// closed feed once: the counts already carried for the first are not
// taken again for the second.
func TestFeedTwinsClosingOneAfterAnotherAreEachCarriedOnce(t *testing.T) {
	ten := producer.FeedStats{Granted: 10, Delivered: 10, Dispatched: 10}
	checkFeedSeries(t, []feedStep{
		{"three open", []producer.FeedStats{ten, ten, ten}, 30, 30, 30},
		{"one closed", []producer.FeedStats{ten, ten}, 30, 30, 30},
		{"another closed", []producer.FeedStats{ten}, 30, 30, 30},
		{"the last counted on", []producer.FeedStats{{Granted: 12, Delivered: 11, Dispatched: 11}}, 32, 31, 31},
	})
}

// feedStep is a scrape of the series of the feeds named "c" of a stage:
// the open feeds' counters, and the series' counters it must carry (-1:
// no series).
type feedStep struct {
	name                           string
	open                           []producer.FeedStats
	granted, delivered, dispatched float64
}

// checkFeedSeries scrapes an observer of a pipeline whose stage has the
// open feeds of each step in turn, and checks the series' counters.
func checkFeedSeries(t *testing.T, steps []feedStep) {
	t.Helper()
	p := newFakePipeline(feedsNamedC(nil))
	obs := observe.New(observe.Options{})
	add(t, obs, p)
	h := obs.Handler(nil)
	for _, c := range steps {
		p.set(feedsNamedC(c.open))
		code, body := serveMetrics(t, h)
		if code != http.StatusOK {
			t.Fatalf("%s: /metrics answered %d:\n%s", c.name, code, body)
		}
		got, err := parseExposition(body)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for name, want := range map[string]float64{
			"boulevard_producer_feed_permits_granted_total":     c.granted,
			"boulevard_producer_feed_messages_delivered_total":  c.delivered,
			"boulevard_producer_feed_messages_dispatched_total": c.dispatched,
		} {
			s, ok := got[name+feedCLabels]
			switch {
			case want < 0 && ok:
				t.Errorf("%s: %s%s = %v, want no series", c.name, name, feedCLabels, s.value)
			case want >= 0 && (!ok || s.value != want):
				t.Errorf("%s: %s%s = %v (present: %t), want %v", c.name, name, feedCLabels, s.value, ok, want)
			}
		}
	}
}

// feedsNamedC is the stats of a pipeline "orders" whose stage
// "orders.producer.0" has open feeds named "c" with the counters fs.
func feedsNamedC(fs []producer.FeedStats) pipeline.Stats {
	named := make([]producer.NamedFeedStats, len(fs))
	for i, f := range fs {
		named[i] = producer.NamedFeedStats{Name: "c", FeedStats: f}
	}
	return pipeline.Stats{Name: "orders", Producers: []pipeline.ProducerStats{{
		StageStatus: producer.StageStatus{Stage: "orders.producer.0"}, Feeds: named}}}
}

// feedCLabels are the labels of the series of feedsNamedC's feeds.
const feedCLabels = `{feed=c,pipeline=orders,stage=orders.producer.0}`

// Guarantee: scrapes served at the same time, of a stage with two open
// feeds of a name, each carry the feed series with the feeds' counters
// added; what the observer keeps of the series between scrapes is shared
// by them safely (the race detector checks it).
func TestScrapesAtTheSameTimeEachCarryTheFeedSeries(t *testing.T) {
	const scrapers, scrapes = 4, 20
	p := newFakePipeline(feedsNamedC([]producer.FeedStats{{Granted: 10, Delivered: 5, Dispatched: 5}, {Granted: 7, Delivered: 7, Dispatched: 7}}))
	obs := observe.New(observe.Options{})
	add(t, obs, p)
	h := obs.Handler(nil)
	errs := make(chan error, scrapers*scrapes)
	var wg sync.WaitGroup
	for range scrapers {
		wg.Go(func() {
			for range scrapes {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				got, err := parseExposition(rec.Body.String())
				if err != nil {
					errs <- err
					continue
				}
				const name = "boulevard_producer_feed_permits_granted_total" + feedCLabels
				if s, ok := got[name]; !ok || s.value != 17 {
					errs <- fmt.Errorf("%s = %v (present: %t), want 17", name, s.value, ok)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
