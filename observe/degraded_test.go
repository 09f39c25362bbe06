package observe_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: a producer stage whose source cannot read from its broker
// shows as degraded in boulevard_producer_state (and as running no more),
// makes /readyz fail with its error, and leaves /healthz passing: the
// pipeline still runs and its source rides the outage out.
func TestDegradedStageShowsInTheStateMetricAndReadiness(t *testing.T) {
	errDown := errors.New("kafka: client has run out of available brokers to talk to")
	st := pipeline.Stats{Name: "orders", Started: time.Now(), Producers: []pipeline.ProducerStats{
		{StageStatus: producer.StageStatus{Stage: "orders.producer.0", State: producer.StateDegraded, Since: time.Now(), LastError: errDown}},
		{StageStatus: producer.StageStatus{Stage: "orders.producer.1", State: producer.StateRunning, Since: time.Now()}},
	}}
	obs := observe.New(observe.Options{})
	add(t, obs, newFakePipeline(st))
	h := obs.Handler(nil)
	code, body := serveMetrics(t, h)
	if code != http.StatusOK {
		t.Fatalf("/metrics answered %d:\n%s", code, body)
	}
	expectSeriesOnce(t, body, `boulevard_producer_state{pipeline="orders",stage="orders.producer.0",state="degraded"}`, 1)
	expectSeriesOnce(t, body, `boulevard_producer_state{pipeline="orders",stage="orders.producer.0",state="running"}`, 0)
	expectSeriesOnce(t, body, `boulevard_producer_state{pipeline="orders",stage="orders.producer.1",state="degraded"}`, 0)
	expect(t, h, "/readyz", http.StatusServiceUnavailable, "orders.producer.0 degraded: "+errDown.Error())
	expect(t, h, "/healthz", http.StatusOK, "")
}
