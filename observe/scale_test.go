package observe_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/internal/logattr"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// scalePartitions is the partition count of the scale tests:
// BOULEVARD_SCALE_PARTITIONS, or def.
func scalePartitions(def int) int {
	if v, err := strconv.Atoi(os.Getenv("BOULEVARD_SCALE_PARTITIONS")); err == nil && v > 0 {
		return v
	}
	return def
}

// manyPartitions returns the stats of a pipeline whose one producer stage
// runs a Kafka member claiming parts partitions of topic "events" (one
// feed each, named as the Kafka sources name them), and those of the
// member's source.
func manyPartitions(parts int) (pipeline.Stats, kafka.Stats) {
	feeds := make([]producer.NamedFeedStats, parts)
	claims := make([]kafka.PartitionStats, parts)
	for i := range parts {
		// Counters and offsets that differ from partition to partition,
		// as a running member's do (so that gzip finds no more repeats
		// than in a real scrape).
		n := int64(i)*7_919 + 1_000_000
		feeds[i] = producer.NamedFeedStats{Name: fmt.Sprintf("events/%d", i),
			FeedStats: producer.FeedStats{Granted: int(n + 100), Remaining: i % 100, Delivered: int(n + 100 - int64(i%100)), Dispatched: int(n + 100 - int64(i%100))}}
		claims[i] = kafka.PartitionStats{Topic: "events", Partition: int32(i), GenerationID: 7,
			Committed: 100 * n, Marked: 100*n + int64(i%13), Next: 100*n + int64(i%100), HighWater: 100*n + int64(i%1_000),
			Lag: int64(i % 1_000), FetchLag: int64(i%1_000 - i%100), InFlight: i % 100}
	}
	now := time.Now()
	pst := pipeline.Stats{Name: "orders", Time: now, Started: now.Add(-time.Hour),
		Producers: []pipeline.ProducerStats{{StageStatus: producer.StageStatus{Stage: "orders.producer.0",
			State: producer.StateRunning, Since: now.Add(-time.Hour)}, Feeds: feeds}}}
	kst := kafka.Stats{GroupID: "orders", Members: []kafka.MemberStats{{Stage: "orders.producer.0",
		MemberID: "boulevard-1", GenerationID: 7, Rebalances: 3, Commits: 10_000, Partitions: claims}}}
	return pst, kst
}

// scrapeTimed answers one GET of path from srv: its body, uncompressed unless gzip,
// and how long it took.
func scrapeTimed(t *testing.T, srv *httptest.Server, path string, gzip bool) ([]byte, time.Duration) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	cl := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer cl.CloseIdleConnections()
	start := time.Now()
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v: %.300s", path, resp.StatusCode, err, body)
	}
	return body, took
}

// Guarantee: with a Kafka member claiming many partitions
// (BOULEVARD_SCALE_PARTITIONS, 64 by default), /metrics and /stats report
// every partition's series and feed, and answer well within
// Options.StatsTimeout (the bound the examples' server sizes its write
// timeout on); the test logs their sizes and times.
func TestScrapesReportEveryPartitionWithinStatsTimeoutAtManyPartitions(t *testing.T) {
	parts := scalePartitions(64)
	pst, kst := manyPartitions(parts)
	obs := observe.New(observe.Options{})
	if err := obs.Add(t.Context(), newFakePipeline(pst)); err != nil {
		t.Fatal(err)
	}
	if err := obs.AddKafka(t.Context(), newFixedKafka(kst)); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)
	srv := httptest.NewServer(obs.Handler(reg))
	defer srv.Close()
	bound := observe.DefaultStatsTimeout

	metrics, metricsIn := scrapeTimed(t, srv, "/metrics", false)
	for _, series := range []string{"kafka_consumer_lag_messages{", "kafka_committed_offset{", "producer_feed_permits_granted_total{"} {
		if n := bytes.Count(metrics, []byte("\n"+"boulevard_"+series)); n != parts {
			t.Errorf("/metrics has %d boulevard_%s series, want one per partition, %d", n, series, parts)
		}
	}
	zipped, zippedIn := scrapeTimed(t, srv, "/metrics", true)
	stats, statsIn := scrapeTimed(t, srv, "/stats", false)
	var snap observe.Snapshot
	if err := json.Unmarshal(stats, &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Kafka) != 1 || len(snap.Kafka[0].Members) != 1 || len(snap.Kafka[0].Members[0].Partitions) != parts ||
		len(snap.Pipelines) != 1 || len(snap.Pipelines[0].Producers[0].Feeds) != parts {
		t.Errorf("/stats does not report the %d partitions and feeds", parts)
	}
	for _, s := range []struct {
		what string
		took time.Duration
	}{{"/metrics", metricsIn}, {"/metrics (gzip)", zippedIn}, {"/stats", statsIn}} {
		if s.took > bound {
			t.Errorf("%s at %d partitions answered in %v, more than StatsTimeout (%v)", s.what, parts, s.took, bound)
		}
	}
	t.Logf("%d partitions: /metrics %d bytes (gzip %d) in %v (gzip %v), /stats %d bytes in %v",
		parts, len(metrics), len(zipped), metricsIn.Round(time.Millisecond), zippedIn.Round(time.Millisecond),
		len(stats), statsIn.Round(time.Millisecond))
}

// Guarantee: a scrape that first sees many partitions claimed by two
// members at once (a rebalance moving them all) logs one line for the
// group, of a bounded size, naming the first logattr.MaxListed of them and
// counting them all; the scrapes after it, while the duplicates last, log
// nothing more; each partition's series is still exported once.
func TestPartitionsClaimedTwiceLogOneBoundedLinePerScrape(t *testing.T) {
	parts := max(scalePartitions(64), 2*logattr.MaxListed)
	_, stale := manyPartitions(parts)
	_, current := manyPartitions(parts)
	current.Members[0].Stage = "orders.producer.1"
	current.Members[0].GenerationID = 8
	for i := range current.Members[0].Partitions {
		current.Members[0].Partitions[i].GenerationID = 8
	}
	var lines logtest.Lines
	obs := observe.New(observe.Options{Logger: slog.New(slog.NewTextHandler(&lines, nil))})
	if err := obs.AddKafka(t.Context(), newFixedKafka(stale), newFixedKafka(current)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(obs.Handler(nil))
	defer srv.Close()
	for range 3 {
		metrics, _ := scrapeTimed(t, srv, "/metrics", false)
		if n := bytes.Count(metrics, []byte("\nboulevard_kafka_consumer_lag_messages{")); n != parts {
			t.Fatalf("/metrics has %d lag series, want one per partition, %d", n, parts)
		}
	}
	logged := lines.Matching("claim the same partition")
	if len(logged) != 1 {
		t.Fatalf("%d lines on %d partitions claimed twice over 3 scrapes, want 1: %.300q", len(logged), parts, logged)
	}
	line := logged[0]
	if len(line) > 2<<10 {
		t.Errorf("the line is %d bytes, want at most 2 KiB: %.300q...", len(line), line)
	}
	if n := strings.Count(line, "events/"); n != logattr.MaxListed {
		t.Errorf("the line names %d partitions, want %d: %q", n, logattr.MaxListed, line)
	}
	if want := fmt.Sprintf(" partitions_count=%d", parts); !strings.Contains(line, want) || !strings.Contains(line, "group=orders") {
		t.Errorf("the line %q does not name the group and count the partitions (%q)", line, want)
	}
}
