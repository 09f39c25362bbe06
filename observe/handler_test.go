package observe_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// get requests path from h and decodes its JSON report.
func get(t *testing.T, h http.Handler, path string) (int, observe.Report) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	var rep observe.Report
	if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
		t.Fatalf("%s: body %q is not a JSON report: %v", path, w.Body.String(), err)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q, want application/json", path, ct)
	}
	return w.Code, rep
}

// expect checks the status code of path and that the report's reasons
// contain want ("" when the check passes).
func expect(t *testing.T, h http.Handler, path string, code int, want string) observe.Report {
	t.Helper()
	got, rep := get(t, h, path)
	if got != code {
		t.Fatalf("%s: %d %+v, want %d", path, got, rep, code)
	}
	if want != "" && !strings.Contains(rep.Pipelines[0].Reason, want) {
		t.Fatalf("%s: reason %q, want it to contain %q", path, rep.Pipelines[0].Reason, want)
	}
	return rep
}

// Guarantee: /readyz is 503 before Start and after Stop and 200 while a
// push-only pipeline runs; /healthz stays 200 through a normal stop.
func TestReadyzFollowsThePipelinesLife(t *testing.T) {
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:       "life",
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	obs := observe.New(observe.Options{})
	add(t, obs, p)
	h := obs.Handler(nil)
	rep := expect(t, h, "/readyz", http.StatusServiceUnavailable, "not started")
	if rep.Status != "not ready" || rep.Pipelines[0].Name != "life" || rep.Pipelines[0].OK {
		t.Errorf("report before Start: %+v", rep)
	}
	expect(t, h, "/healthz", http.StatusOK, "")
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rep = expect(t, h, "/readyz", http.StatusOK, "")
	if rep.Status != "ok" || !rep.Pipelines[0].OK {
		t.Errorf("report while running: %+v", rep)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	expect(t, h, "/readyz", http.StatusServiceUnavailable, "stopped")
	expect(t, h, "/healthz", http.StatusOK, "")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/other", nil))
	if w.Code != http.StatusNotFound {
		t.Errorf("/other: %d, want 404", w.Code)
	}
}

// Guarantee: /healthz is 503, naming the stage and its error, once a
// source that keeps failing made its stage give up and stop the pipeline.
func TestHealthzReportsAPipelineStoppedByAFatalError(t *testing.T) {
	src := producer.SourceFunc[int](func(context.Context, *producer.Stage[int]) error {
		return errors.New("broker refused the subscription")
	})
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name: "doomed",
		Producer: producer.Options[int]{Source: src, Concurrency: 1,
			Restart: producer.Restart{MaxConsecutiveFailures: 2, Backoff: time.Millisecond, MaxBackoff: time.Millisecond}},
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	obs := observe.New(observe.Options{})
	add(t, obs, p)
	h := obs.Handler(nil)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	rep := expect(t, h, "/healthz", http.StatusServiceUnavailable, "broker refused the subscription")
	if rep.Status != "unhealthy" {
		t.Errorf("status %q, want unhealthy", rep.Status)
	}
	expect(t, h, "/readyz", http.StatusServiceUnavailable, "")
	_ = p.Stop(context.Background())
}

// freePort returns a TCP port of 127.0.0.1 nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// Guarantee: a Kafka source whose broker does not answer makes /readyz 503
// with the connection error as the reason; once a broker listens on that
// address the source connects and /readyz turns 200; the consumer lag
// gauge reports the backlog per partition and drops to 0 once it is
// consumed and committed.
func TestReadyzFollowsAKafkaSourceFromADeadPortToRecovery(t *testing.T) {
	port := freePort(t)
	addr := net.JoinHostPort("127.0.0.1", itoa(port))
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cfg.Consumer.Group.Session.Timeout = 2 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	src, err := kafka.New(kafka.Options{
		Brokers: []string{addr}, GroupID: "readers", Topics: []string{"events"},
		InitialOffset: kafka.OffsetEarliest, CommitInterval: 50 * time.Millisecond,
		ConnectTimeout: time.Second, Config: cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name: "events",
		Producer: producer.Options[[]byte]{Source: src, Concurrency: 1,
			Restart: producer.Restart{Backoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
				MaxConsecutiveFailures: 10000, MaxRestarts: 10000, MaxFailingTime: time.Hour}},
		Processors: processor.Options[[]byte, []byte]{Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
			return m.Data, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	obs := observe.New(observe.Options{})
	add(t, obs, p)
	if err := obs.AddKafka(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, obs)
	h := obs.Handler(reg)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	var reason string
	wait.For(t, "the dead broker reported by /readyz", func() bool {
		code, rep := get(t, h, "/readyz")
		reason = rep.Pipelines[0].Reason
		return code == http.StatusServiceUnavailable && strings.Contains(reason, "failed runs in a row") && strings.Contains(reason, addr)
	})
	t.Logf("not ready: %s", reason)
	expect(t, h, "/healthz", http.StatusOK, "")

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(2, "events"),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		r := &kgo.Record{Topic: "events", Partition: int32(i % 2), Value: []byte("v")}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	wait.For(t, "/readyz turning 200 once the broker listens", func() bool {
		code, _ := get(t, h, "/readyz")
		return code == http.StatusOK
	})
	wait.For(t, "the lag of both partitions back to 0 once the backlog is committed", func() bool {
		var highWater float64
		for _, part := range []string{"0", "1"} {
			v, ok := find(t, reg, "boulevard_kafka_consumer_lag_messages", map[string]string{"group": "readers", "topic": "events", "partition": part})
			hw, _ := find(t, reg, "boulevard_kafka_high_water_offset", map[string]string{"partition": part})
			if !ok || v != 0 {
				return false
			}
			highWater += hw
		}
		return highWater == 20
	})
	if v, _ := find(t, reg, "boulevard_processor_messages_succeeded_total", map[string]string{"pipeline": "events"}); v != 20 {
		t.Errorf("processors succeeded %v, want 20", v)
	}
}
