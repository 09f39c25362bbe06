package observe_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// sevenThenWait opens a feed "gone" and closes it, then a feed "live" that
// takes its permits and delivers 7 messages, and waits for the end of its
// run.
func sevenThenWait() producer.Source[int] {
	return producer.SourceFunc[int](func(ctx context.Context, stage *producer.Stage[int]) error {
		stage.NewFeed("gone", nil).Close()
		feed := stage.NewFeed("live", nil)
		n, err := feed.Acquire(ctx, 7)
		if err != nil {
			return nil
		}
		for i := range n {
			feed.Deliver(message.New(i, acker.Discard, uint64(i)))
		}
		<-ctx.Done()
		return nil
	})
}

// Guarantee: each producer stage reports the permit counters of its open
// feeds (granted, outstanding, delivered, dispatched) in Stats, in the
// metrics and in /stats; a closed feed is no longer reported.
func TestFeedPermitCountersAreReported(t *testing.T) {
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:       "feeds",
		Producer:   producer.Options[int]{Source: sevenThenWait(), Concurrency: 1},
		Processors: processor.Options[int, int]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	wait.For(t, "7 messages handled", func() bool { return p.Stats().Processors.Succeeded == 7 })

	initial := producer.Flow{}.WithDefaults().Initial
	feeds := p.Stats().Producers[0].Feeds
	want := producer.NamedFeedStats{Name: "live", FeedStats: producer.FeedStats{
		Granted: initial, Remaining: initial - 7, Delivered: 7, Dispatched: 7}}
	if len(feeds) != 1 || feeds[0] != want {
		t.Fatalf("Stats().Producers[0].Feeds = %+v, want [%+v]", feeds, want)
	}

	obs := observe.New(observe.Options{})
	add(t, obs, p)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(obs)
	labels := map[string]string{"pipeline": "feeds", "stage": "feeds.producer.0", "feed": "live"}
	for name, v := range map[string]float64{
		"boulevard_producer_feed_permits_granted_total":     float64(initial),
		"boulevard_producer_feed_permits_outstanding":       float64(initial - 7),
		"boulevard_producer_feed_messages_delivered_total":  7,
		"boulevard_producer_feed_messages_dispatched_total": 7,
	} {
		if got, ok := find(t, reg, name, labels); !ok || got != v {
			t.Errorf("%s = %v (found %v), want %v", name, got, ok, v)
		}
	}
	if _, ok := find(t, reg, "boulevard_producer_feed_permits_granted_total", map[string]string{"feed": "gone"}); ok {
		t.Error("the closed feed is still reported")
	}
	problems, err := testutil.CollectAndLint(obs)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("lint: %s: %s", pr.Metric, pr.Text)
	}

	rr := httptest.NewRecorder()
	obs.Handler(nil).ServeHTTP(rr, httptest.NewRequest("GET", "/stats", nil))
	var snap observe.Snapshot
	if err := json.NewDecoder(rr.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	got := snap.Pipelines[0].Producers[0].Feeds
	if len(got) != 1 || got[0] != (observe.FeedSnapshot{Name: "live", Granted: initial, Outstanding: initial - 7, Delivered: 7, Dispatched: 7}) {
		t.Errorf("/stats feeds = %+v", got)
	}
}

// statsOf is a Pipeline whose Stats are st.
type statsOf pipeline.Stats

func (s statsOf) Stats() pipeline.Stats { return pipeline.Stats(s) }

// Guarantee: /stats carries every counter a producer stage reports: the
// messages a cut-short drain left in the stage (Unhandled), the age of
// its hand-over to the processors (LongestHandOff), and each feed's
// withdrawn and overdelivered messages beside its permits, so that what
// Stats shows of a misbehaving source, of a drain cut short, or of a
// PartitionBy that blocks, is not lost on the way to the JSON.
func TestStatsJSONCarriesEveryProducerCounter(t *testing.T) {
	st := pipeline.Stats{Name: "orders", Producers: []pipeline.ProducerStats{{
		StageStatus: producer.StageStatus{Stage: "orders.producer.0", State: producer.StateRunning},
		Buffered:    3,
		Unhandled:   11,
		Feeds: []producer.NamedFeedStats{{Name: "p0", FeedStats: producer.FeedStats{
			Remaining: 5, Granted: 50, Delivered: 48, Dispatched: 45, Withdrawn: 2, Overdelivered: 4}}},
		LongestHandOff: 42 * time.Second,
	}}}
	obs := observe.New(observe.Options{})
	add(t, obs, statsOf(st))
	rr := httptest.NewRecorder()
	obs.Handler(nil).ServeHTTP(rr, httptest.NewRequest("GET", "/stats", nil))
	var snap observe.Snapshot
	if err := json.NewDecoder(rr.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Pipelines) != 1 || len(snap.Pipelines[0].Producers) != 1 {
		t.Fatalf("/stats pipelines = %+v, want one with one producer stage", snap.Pipelines)
	}
	ps := snap.Pipelines[0].Producers[0]
	wantFeed := observe.FeedSnapshot{Name: "p0", Granted: 50, Outstanding: 5, Delivered: 48, Dispatched: 45, Withdrawn: 2, Overdelivered: 4}
	if ps.Buffered != 3 || ps.Unhandled != 11 || len(ps.Feeds) != 1 || ps.Feeds[0] != wantFeed || ps.LongestHandOff != 42*time.Second {
		t.Fatalf("/stats producer stage = %+v, want buffered 3, unhandled 11, feeds [%+v] and a 42s hand-over", ps, wantFeed)
	}
}
